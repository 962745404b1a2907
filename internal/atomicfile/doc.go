// Package atomicfile writes a file so that a reader, or the same path
// after a crash, sees the old content or the new, never a part of it.
package atomicfile
