package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// scratchHome is a NERVE_HOME whose scratch directories go in a cache
// directory of the test's own.
func scratchHome(t *testing.T) (Scratch, string) {
	t.Helper()
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	return Scratch{Home: t.TempDir()}, filepath.Join(cache, "nerve", "scratch")
}

func mustDir(t *testing.T, s Scratch, key string, step int) string {
	t.Helper()
	dir, err := s.Dir(key, step)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("scratch %s: %v %v, want a 0700 directory", dir, fi, err)
	}
	return dir
}

// A thread's scratch directory is private, outside NERVE_HOME, the same
// for each of its turns (made again when a restart or a person removed
// it), distinct per turn when asked and per NERVE_HOME.
func TestScratchDir(t *testing.T) {
	s, base := scratchHome(t)
	dir := mustDir(t, s, "thread-1", 0)
	if filepath.Dir(dir) != base || within(dir, s.Home) || within(s.Home, dir) {
		t.Fatalf("scratch %s: want it in %s, away from NERVE_HOME %s", dir, base, s.Home)
	}
	if fi, _ := os.Stat(base); fi.Mode().Perm() != 0o700 {
		t.Errorf("%s is %v", base, fi.Mode())
	}
	write(t, filepath.Join(dir, "notes.txt"), "for the next turn")
	if again := mustDir(t, s, "thread-1", 0); again != dir {
		t.Errorf("the next turn got %s, not %s", again, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("the notes of the last turn are gone: %v", err)
	}
	other := Scratch{Home: t.TempDir()}
	dirs := []string{dir, mustDir(t, s, "thread-1", 2), mustDir(t, s, "thread-2", 0), mustDir(t, other, "thread-1", 0)}
	if len(slices.Compact(slices.Sorted(slices.Values(dirs)))) != len(dirs) {
		t.Errorf("two scratch directories share a path: %v", dirs)
	}
	os.RemoveAll(dir)
	mustDir(t, s, "thread-1", 0)

	// An agent left a link to NERVE_HOME and opened its directory up.
	os.RemoveAll(dir)
	if err := os.Symlink(s.Home, dir); err != nil {
		t.Fatal(err)
	}
	if mustDir(t, s, "thread-1", 0); !dirExists(s.Home) {
		t.Fatal("NERVE_HOME went with the link")
	}
	os.Chmod(dir, 0o755)
	mustDir(t, s, "thread-1", 0)

	if !s.Contains(dir) || !s.Contains(filepath.Join(dir, "sub")) || s.Contains(s.Home) || s.Contains("") {
		t.Error("Contains")
	}
	s.Remove("thread-1", 0)
	if dirExists(dir) || fileExists(dir+".key") {
		t.Errorf("Remove left %s", dir)
	}
}

// No scratch directory is inside NERVE_HOME, nor holds it: a cache
// directory inside it gives way to the temporary directory; a temporary
// directory someone else put a link at is refused.
func TestScratchBase(t *testing.T) {
	home := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("TMPDIR", tmp)
	s := Scratch{Home: home}
	dir := mustDir(t, s, "thread-1", 0)
	want := filepath.Join(tmp, "nerve-scratch-"+strconv.Itoa(os.Getuid()))
	if filepath.Dir(dir) != want {
		t.Fatalf("scratch %s, want it in %s", dir, want)
	}
	os.RemoveAll(want)
	if err := os.Symlink(home, want); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Dir("thread-1", 0); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a link in place of the scratch base: %v", err)
	}
	t.Setenv("TMPDIR", filepath.Join(home, "tmp"))
	if _, err := s.Dir("thread-1", 0); err == nil || !strings.Contains(err.Error(), "outside NERVE_HOME") {
		t.Errorf("only NERVE_HOME for scratch: %v", err)
	}
}

// Prune removes the scratch directories of this NERVE_HOME's threads that
// keep does not name, and those a crash left without their record; another
// NERVE_HOME's are not its to remove.
func TestScratchPrune(t *testing.T) {
	s, _ := scratchHome(t)
	other := Scratch{Home: t.TempDir()}
	live := mustDir(t, s, "thread-1", 0)
	ended := mustDir(t, s, "thread-2", 0)
	remote := mustDir(t, s, "origin--w--thread-4", 3)
	unrecorded := mustDir(t, s, "thread-5", 0)
	os.Remove(unrecorded + ".key")
	foreign := mustDir(t, other, "thread-2", 0)

	got := s.Prune(func(key string) bool { return key == "thread-1" || key == "origin--w--thread-4" })
	slices.Sort(got)
	want := []string{ended, unrecorded}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("pruned %v, want %v", got, want)
	}
	for _, d := range []string{live, remote, foreign} {
		if !dirExists(d) {
			t.Errorf("%s was pruned", d)
		}
	}
	for _, d := range want {
		if dirExists(d) || fileExists(d+".key") {
			t.Errorf("%s survived the prune", d)
		}
	}
	m := &Manager{Home: s.Home}
	p, err := m.Prune(bg, Keep{})
	if err != nil || len(p.Scratch) != 2 || dirExists(live) {
		t.Errorf("a workspace prune of everything: %+v %v", p, err)
	}
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// A scratch directory is known for one however it is named: the cache
// directory reached through a link, and the directory named as getcwd
// names it (resolved), or through the link.
func TestScratchContainsThroughALink(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "cache")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", link)
	s := Scratch{Home: t.TempDir()}
	dir := mustDir(t, s, "thread-1", 0)
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	viaLink := filepath.Join(link, "nerve", "scratch", filepath.Base(dir))
	for _, p := range []string{dir, resolved, viaLink, filepath.Join(resolved, "sub")} {
		if !s.Contains(p) {
			t.Errorf("Contains(%s) = false: it is %s's scratch directory", p, dir)
		}
	}
	if s.Contains(s.Home) {
		t.Errorf("Contains(NERVE_HOME)")
	}
}
