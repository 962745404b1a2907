package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// maxSocketPath is the portable limit of sun_path, less the terminator.
const maxSocketPath = 103

// ErrRunning means another daemon already serves this NERVE_HOME.
type ErrRunning struct{ Home string }

func (e *ErrRunning) Error() string {
	return fmt.Sprintf("a nerve daemon is already running for %s", e.Home)
}
func (e *ErrRunning) ExitCode() int { return 2 }
func (e *ErrRunning) Hint() string {
	return "stop it with 'nerve daemon stop', or set NERVE_HOME to run a second agent"
}

// lockFile takes an exclusive flock on path. The OS drops it when the
// process dies, so a crashed daemon never blocks the next one.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

var errLocked = errors.New("locked")

// listen creates the control socket: the directory 0700, a stale socket
// (nobody answers) removed, the new one 0600.
func listen(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, over the limit of %d: use a shorter NERVE_HOME", path, len(path), maxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("unix", path, 500*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("listen %s: address already in use", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	// Create it private from the first instant: umask, then chmod to be sure.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
