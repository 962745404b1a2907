package netproxy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// ErrNotFound: the command to run is not on PATH (exit 127, as a shell's).
var ErrNotFound = errors.New("command not found")

// Exec runs argv as a child with this process's stdin, stdout, stderr and
// environment, passes SIGTERM, SIGINT and SIGHUP on to it, and returns its
// exit code: 128+N when signal N ended it, as a shell reports it.
func Exec(argv []string) (int, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 127, fmt.Errorf("%s: %w", argv[0], ErrNotFound)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return 126, fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ps.ExitCode(), nil
	}
	return 1, fmt.Errorf("wait for %s: %w", argv[0], err)
}
