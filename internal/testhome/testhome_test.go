package testhome

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// The tests' home, NERVE_HOME, caches and config are the temporary
// directory's, as os.UserHomeDir and friends see them, and start empty.
func TestTheTestsHaveAHomeOfTheirOwn(t *testing.T) {
	root := Dir()
	if root == "" || !strings.HasPrefix(root, os.TempDir()) {
		t.Fatalf("Dir() = %q: want a directory under %s", root, os.TempDir())
	}
	home, err := os.UserHomeDir()
	if err != nil || home != filepath.Join(root, "home") {
		t.Fatalf("os.UserHomeDir() = %q, %v: want %s", home, err, filepath.Join(root, "home"))
	}
	cfg, _ := os.UserConfigDir()
	cache, _ := os.UserCacheDir()
	for name, p := range map[string]string{"UserConfigDir": cfg, "UserCacheDir": cache,
		"NERVE_HOME": os.Getenv("NERVE_HOME"), "XDG_DATA_HOME": os.Getenv("XDG_DATA_HOME"),
		"XDG_STATE_HOME": os.Getenv("XDG_STATE_HOME"), "XDG_RUNTIME_DIR": os.Getenv("XDG_RUNTIME_DIR")} {
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Errorf("%s = %q: want it under %s", name, p, root)
		}
	}
	if _, err := os.Stat(os.Getenv("NERVE_HOME")); !os.IsNotExist(err) {
		t.Errorf("NERVE_HOME exists before any test made it (%v): a fresh machine has none", err)
	}
	if st, err := os.Stat(os.Getenv("XDG_RUNTIME_DIR")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("XDG_RUNTIME_DIR: %v, %v: want a 0700 directory", st, err)
	}
}

// The go command still finds its own cache and settings.
func TestGoKeepsItsCache(t *testing.T) {
	for _, k := range []string{"GOENV", "GOCACHE", "GOPATH"} {
		if v := os.Getenv(k); v != "" && strings.HasPrefix(v, Dir()) {
			t.Errorf("%s = %s: the go command's own directory moved into the tests' home (a cold cache)", k, v)
		}
	}
}

func TestGoEnvFileKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "env")
	os.WriteFile(p, []byte("GOFLAGS=-buildvcs=false\nGOCACHE=/elsewhere\n"), 0o600)
	if got := goEnvFile(p); !got["GOCACHE"] || !got["GOFLAGS"] || got["GOPATH"] {
		t.Fatalf("goEnvFile = %v", got)
	}
	if got := goEnvFile(filepath.Join(t.TempDir(), "none")); len(got) != 0 {
		t.Fatalf("goEnvFile of no file = %v", got)
	}
}
