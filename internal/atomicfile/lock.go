package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// WithLock runs fn holding an exclusive flock on path+".lock", so that
// writers of path running at once, in any process, take turns at their
// read-modify-write and none loses another's change. The lock is on a
// sibling file, not on path itself: WriteFile renames a new inode over
// path, and a lock on the old one would not stop the next writer. The OS
// drops the lock if the process dies; what a writer killed midway left
// (a temp file) the next one removes.
func WithLock(path string, fn func() error) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	removeLeftovers(path)
	return fn()
}

// removeLeftovers removes the temp files that writes of path killed
// midway left behind; only a holder of path's lock may, since no write
// of path is under way then.
func removeLeftovers(path string) {
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), tempPattern(path)))
	for _, f := range left {
		os.Remove(f)
	}
}
