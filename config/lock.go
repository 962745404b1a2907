package config

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nerve-agents/nerve/internal/atomicfile"
)

// withFileLock runs fn holding an exclusive flock on path+".lock", so
// that writers of path (nerve remote add, nerve init, ...) running at
// once take turns at their read-modify-write and none loses another's
// change. The lock is on a sibling file, not on path itself: an atomic
// write renames a new inode over path, and a lock on the old one would
// not stop the next writer. The OS drops the lock if the process dies;
// what a writer killed midway left (a temp file) the next one removes.
func withFileLock(path string, fn func() error) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	atomicfile.RemoveLeftovers(path)
	return fn()
}
