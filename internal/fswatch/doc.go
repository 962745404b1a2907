// Package fswatch watches directories with fsnotify and reports changes in
// batches: a burst of events (an editor's save is several: write, chmod,
// rename) becomes one call once the paths have been quiet for a while. The
// config watch and the file sense share it, so there is one debounce.
package fswatch
