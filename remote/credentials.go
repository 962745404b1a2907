package remote

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nerve-agents/nerve/internal/atomicfile"
)

// tokenPath is where the agent token for a remote is kept: one 0600 file
// per remote in a 0700 directory, never in nerve.yaml.
func tokenPath(home, remote string) string {
	return filepath.Join(home, "tokens", remote)
}

// SaveToken stores the agent token for remote, atomically, mode 0600.
func SaveToken(home, remote, token string) error {
	dir := filepath.Join(home, "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(tokenPath(home, remote), []byte(token+"\n"), 0o600)
}

// LoadToken returns the stored token for remote, "" when there is none.
// A token file readable by others is refused, as ssh refuses such keys.
func LoadToken(home, remote string) (string, error) {
	return loadSecret(tokenPath(home, remote))
}

// RemoveToken forgets the token for remote.
func RemoveToken(home, remote string) error {
	err := os.Remove(tokenPath(home, remote))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Config is what a client needs of nerve.yaml: the remotes' URLs and
// NERVE_HOME, where their tokens are. *config.Config is one; taking an
// interface keeps this client free of the config loader.
type Config interface {
	RemoteURL(name string) (url string, ok bool)
	NerveHome() string
}

// ForConfig returns a client for the named remote of cfg with its stored
// token.
func ForConfig(cfg Config, name string) (*Client, error) {
	url, ok := cfg.RemoteURL(name)
	if !ok {
		return nil, &UnknownError{Name: name}
	}
	tok, err := LoadToken(cfg.NerveHome(), name)
	if err != nil {
		return nil, err
	}
	person, err := LoadPersonToken(cfg.NerveHome(), name)
	if err != nil {
		return nil, err
	}
	if tok == "" {
		// A person's machine (no agent enrolled) reads threads as them.
		tok = person
	}
	c := New(name, url, tok)
	c.PersonToken = person
	return c, nil
}

// UnknownError is a remote name nerve.yaml does not define: a usage error.
type UnknownError struct{ Name string }

func (e *UnknownError) Error() string { return fmt.Sprintf("unknown remote %q", e.Name) }
func (e *UnknownError) ExitCode() int { return 2 }
func (e *UnknownError) Hint() string {
	return fmt.Sprintf("add it with 'nerve remote add %s URL'; 'nerve remote list' shows the known ones", e.Name)
}
