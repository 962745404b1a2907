package testhome

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dir is the temporary root Setup made ("" before).
var dir string

// Dir is the temporary directory HOME and the others are under, "" when
// Setup has not run in this process.
func Dir() string { return dir }

// Main runs m's tests in a home of their own and exits with their code.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with more to do after the tests: it returns
// the tests' code instead of exiting.
func Run(m *testing.M) int {
	if err := Setup(); err != nil {
		fmt.Fprintln(os.Stderr, "testhome:", err)
		return 1
	}
	code := m.Run()
	removeAll(dir)
	return code
}

// Setup points HOME, NERVE_HOME (HOME/.nerve, which does not exist yet, as
// on a fresh machine) and the XDG base directories at a new temporary
// directory. The go command's own cache, module cache and settings stay
// where they were (tests build nerve and run go list, and a cold cache
// would cost minutes); they are the toolchain's, not nerve's.
func Setup() error {
	keepGoDirs()
	root, err := os.MkdirTemp("", "nerve-test-home-")
	if err != nil {
		return err
	}
	home := filepath.Join(root, "home")
	runtime := filepath.Join(root, "run")
	for _, d := range []string{home, runtime} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	env := map[string]string{
		"HOME":            home,
		"NERVE_HOME":      filepath.Join(home, ".nerve"),
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_CACHE_HOME":  filepath.Join(home, ".cache"),
		"XDG_DATA_HOME":   filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME":  filepath.Join(home, ".local", "state"),
		"XDG_RUNTIME_DIR": runtime,
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	dir = root
	return nil
}

// keepGoDirs sets GOENV, GOCACHE and GOPATH to what the go command would
// use under the user's HOME, unless the environment or the go env file
// already says: with HOME moved, go would look for them there.
func keepGoDirs() {
	cfg, errCfg := os.UserConfigDir()
	cache, errCache := os.UserCacheDir()
	home, errHome := os.UserHomeDir()
	goenv := os.Getenv("GOENV")
	if goenv == "" && errCfg == nil {
		goenv = filepath.Join(cfg, "go", "env")
		os.Setenv("GOENV", goenv)
	}
	inFile := goEnvFile(goenv)
	if os.Getenv("GOCACHE") == "" && !inFile["GOCACHE"] && errCache == nil {
		os.Setenv("GOCACHE", filepath.Join(cache, "go-build"))
	}
	if os.Getenv("GOPATH") == "" && !inFile["GOPATH"] && errHome == nil {
		os.Setenv("GOPATH", filepath.Join(home, "go"))
	}
}

// goEnvFile lists the keys `go env -w` wrote to path.
func goEnvFile(path string) map[string]bool {
	keys := map[string]bool{}
	f, err := os.Open(path)
	if err != nil {
		return keys
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if k, _, ok := strings.Cut(sc.Text(), "="); ok {
			keys[strings.TrimSpace(k)] = true
		}
	}
	return keys
}

// removeAll removes root, making writable first what a test left
// read-only (a directory of mode 0500 cannot be emptied).
func removeAll(root string) {
	if os.RemoveAll(root) == nil {
		return
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(root)
}
