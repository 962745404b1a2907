package workspace

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/testhome"
)

// TestMain keeps the tests away from the user's git config and cache
// (scratch directories): HOME is a temporary directory (testhome) and the
// system config is off.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		crashHelper()
		return
	}
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	code := testhome.Run(m)
	for _, d := range benchTemps {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// gitT runs git in dir as a person would (not through the package) and
// returns its trimmed stdout.
func gitT(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := gitE(dir, args...)
	if err != nil {
		tb.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func gitE(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Tester", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=Tester", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", errors.New(strings.TrimSpace(string(ee.Stderr)))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func write(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func read(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// newRepo is a user's repository on branch main with two commits.
func newRepo(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	gitT(tb, dir, "init", "-q", "-b", "main")
	write(tb, filepath.Join(dir, "README.md"), "# demo\n")
	write(tb, filepath.Join(dir, "a.txt"), "one\ntwo\nthree\n")
	gitT(tb, dir, "add", ".")
	gitT(tb, dir, "commit", "-q", "-m", "first")
	write(tb, filepath.Join(dir, "b.txt"), "bee\n")
	gitT(tb, dir, "add", ".")
	gitT(tb, dir, "commit", "-q", "-m", "second")
	return dir
}

// newRemote is a bare repository on disk holding newRepo's history: the
// shared git remote of a cloud thread.
func newRemote(tb testing.TB) string {
	tb.Helper()
	src := newRepo(tb)
	bare := filepath.Join(tb.TempDir(), "remote.git")
	gitT(tb, "", "clone", "-q", "--bare", src, bare)
	return bare
}

func newManager(tb testing.TB) *Manager {
	tb.Helper()
	return &Manager{Home: tb.TempDir()}
}

// checkout is what a user's checkout looks like: the current branch, its
// commit, the status, the index and the working tree's content of a.txt.
func checkout(tb testing.TB, dir string) string {
	tb.Helper()
	return strings.Join([]string{
		gitT(tb, dir, "symbolic-ref", "HEAD"),
		gitT(tb, dir, "rev-parse", "HEAD"),
		gitT(tb, dir, "status", "--porcelain", "-uall"),
		gitT(tb, dir, "diff", "--cached"),
		read(tb, filepath.Join(dir, "a.txt")),
	}, "\n--\n")
}

func wantErr(tb testing.TB, err, sentinel error, kind string) *Error {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error; want %v", sentinel)
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, sentinel) {
		tb.Fatalf("error %q (%T); want %v", err, err, sentinel)
	}
	if KindOf(err) != kind {
		tb.Fatalf("kind %q; want %q", KindOf(err), kind)
	}
	if strings.Contains(err.Error(), "\n") {
		tb.Fatalf("error %q is not one line", err)
	}
	return e
}

var bg = context.Background()

// branchAt is where branch is in repo, "" when it has none.
func branchAt(tb testing.TB, repo, branch string) string {
	tb.Helper()
	out, err := gitE(repo, "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch)
	if err != nil {
		tb.Fatalf("git for-each-ref: %v", err)
	}
	return out
}

// pushed is where ws's branch is as its thread recorded it: a cloud
// thread that pushed nothing yet has none on the remote.
func pushed(ws Workspace) string {
	if ws.firstPush() {
		return ""
	}
	return ws.Head
}
