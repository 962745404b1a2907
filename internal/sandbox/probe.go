package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
)

// probe is the cached answer of Available: bwrap's path and whether a
// sandbox like a turn's starts here.
var probe = sync.OnceValues(func() (string, error) {
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("no sandbox on %s: nerve's sandbox is bubblewrap, on Linux", runtime.GOOS)
	}
	path := bwrapPath()
	if path == "" {
		return "", errors.New("bwrap not found on PATH")
	}
	s := &Spec{Bwrap: path, Network: NetNone}
	p, argv, env := s.Command("/bin/true", nil)
	cmd := exec.Command(p, argv[1:]...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		// Typically: user namespaces are disabled for unprivileged users
		// (kernel.unprivileged_userns_clone=0, AppArmor's restriction).
		return "", fmt.Errorf("bwrap does not start a sandbox here: %s", msg)
	}
	return path, nil
})

// Available reports whether bwrap works here: nil, or why not. The probe
// runs once per process.
func Available() error {
	_, err := probe()
	return err
}

// bwrapPath is bwrap on the daemon's PATH, "" when there is none.
var bwrapPath = sync.OnceValue(func() string {
	p, _ := exec.LookPath("bwrap")
	return p
})

// Effective is what mode means here: ModeBwrap or ModeNone. For auto
// where bwrap does not work it is ModeNone with the reason (a warning to
// show); for bwrap there, ModeBwrap with the reason (turns fail).
func Effective(mode string) (string, error) {
	switch mode {
	case ModeNone:
		return ModeNone, nil
	case ModeBwrap:
		return ModeBwrap, Available()
	}
	if err := Available(); err != nil {
		return ModeNone, err
	}
	return ModeBwrap, nil
}
