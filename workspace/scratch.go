package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Scratch makes the private directories that turns with neither a
// workspace nor a workdir of their own work in. They lie outside
// NERVE_HOME, so an agent whose CLI confines writes to its workdir cannot
// reach nerve.yaml or the tokens: in the user's cache directory
// (~/.cache/nerve/scratch; a per-user 0700 directory under the system's
// temporary one when there is no home), flat, each named by its
// NERVE_HOME and thread, with a record of the thread's key beside it for
// Prune. Every directory is 0700.
type Scratch struct {
	Home string // NERVE_HOME: whose turns
}

// Dir returns the scratch directory of thread key, made if missing: the
// thread's own, shared by its turns on this machine, when step is 0; one
// turn's own otherwise.
func (s Scratch) Dir(key string, step int) (string, error) {
	base, prefix, err := s.place()
	if err != nil {
		return "", err
	}
	if err := privateDir(base, true); err != nil {
		return "", err
	}
	dir := filepath.Join(base, name(prefix, key, step))
	// The record first: Prune removes a directory without one (what a
	// crash between the two left), so a prune running meanwhile must not
	// find this one unrecorded.
	if err := record(dir+".key", key); err != nil {
		return "", fmt.Errorf("record scratch directory %s: %w", dir, err)
	}
	if err := privateDir(dir, false); err != nil {
		return "", err
	}
	return dir, nil
}

// Remove deletes a scratch directory Dir made (nothing when there is none).
func (s Scratch) Remove(key string, step int) {
	base, prefix, err := s.place()
	if err != nil {
		return
	}
	dir := filepath.Join(base, name(prefix, key, step))
	_ = os.RemoveAll(dir)
	_ = os.Remove(dir + ".key")
}

// Contains reports whether path is a scratch directory or inside one.
func (s Scratch) Contains(path string) bool {
	base, _, err := s.place()
	return err == nil && path != "" && within(absPath(path), base)
}

// Prune removes this NERVE_HOME's scratch directories of the threads keep
// does not name, and those without a record (a crash while making one).
func (s Scratch) Prune(keep func(key string) bool) []string {
	base, prefix, err := s.place()
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir(base)
	var pruned []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || strings.HasSuffix(e.Name(), ".key") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		rec, err := os.ReadFile(dir + ".key")
		if err == nil && keep != nil && keep(strings.TrimSpace(string(rec))) {
			continue
		}
		_ = os.RemoveAll(dir)
		_ = os.Remove(dir + ".key")
		pruned = append(pruned, dir)
	}
	return pruned
}

// name is a directory's name: the NERVE_HOME's prefix, then the
// thread's key (and the turn's step) made safe, so two daemons never
// share one.
func name(prefix, key string, step int) string {
	if step > 0 {
		key += "#step-" + strconv.Itoa(step)
	}
	return prefix + dirName(key)
}

// place is where this NERVE_HOME's scratch directories go, and the prefix
// of their names there (an id of NERVE_HOME). They go in the user's
// cache, else the temporary directory; never NERVE_HOME, a directory
// inside it or one holding it.
func (s Scratch) place() (base, prefix string, err error) {
	home := absPath(s.Home)
	sum := sha256.Sum256([]byte(home))
	prefix = hex.EncodeToString(sum[:6]) + "-"
	outside := func(b string) bool { return !within(b, home) && !within(home, b) }
	if cache, err := os.UserCacheDir(); err == nil {
		if b := filepath.Join(absPath(cache), "nerve", "scratch"); outside(b) {
			return b, prefix, nil
		}
	}
	if b := filepath.Join(absPath(os.TempDir()), "nerve-scratch-"+strconv.Itoa(os.Getuid())); outside(b) {
		return b, prefix, nil
	}
	return "", "", fmt.Errorf("no directory for scratch outside NERVE_HOME %s (set XDG_CACHE_HOME or TMPDIR elsewhere)", home)
}

// record writes key to path unless it holds it already: rewriting it
// at every turn cost most of making a turn's directory.
func record(path, key string) error {
	want := key + "\n"
	if b, err := os.ReadFile(path); err == nil && string(b) == want {
		return nil
	}
	return os.WriteFile(path, []byte(want), 0o600)
}

// privateDir makes dir a directory of this user's that no one else may
// enter (0700), made when missing. A symbolic link or a file in its
// place is an error for base (the temporary directory is shared: someone
// may have put it there), and replaced otherwise.
func privateDir(dir string, base bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create scratch directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err == nil && !fi.IsDir() && !base {
		// An agent left a link or a file where its directory was.
		if err = os.RemoveAll(dir); err == nil {
			err = os.Mkdir(dir, 0o700)
		}
		if err == nil {
			fi, err = os.Lstat(dir)
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("create scratch directory %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("scratch directory %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("scratch directory %s belongs to another user", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("make scratch directory %s private: %w", dir, err)
		}
	}
	return nil
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// absPath is p absolute and with its symbolic links resolved where it
// exists: a process's working directory comes back resolved (getcwd), so
// paths are compared as the kernel names them.
func absPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}
