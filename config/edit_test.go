package config_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/nerve-agents/nerve/config"
)

// TestConcurrentEditProcess is a child of TestConcurrentEditsKeepEveryChange:
// one writer, as 'nerve init --remote' is (the first nerve.yaml, then a
// remote), run as its own process.
func TestConcurrentEditProcess(t *testing.T) {
	path, name := os.Getenv("NERVE_TEST_EDIT_FILE"), os.Getenv("NERVE_TEST_EDIT_REMOTE")
	if path == "" {
		t.Skip("run by TestConcurrentEditsKeepEveryChange")
	}
	if _, err := config.WriteInitial(path, "laptop-1"); err != nil {
		t.Fatal(err)
	}
	if err := config.AddRemote(path, name, "http://127.0.0.1:1/"+name); err != nil {
		t.Fatal(err)
	}
}

// Writers in separate processes take turns: no remote one adds is lost to
// another's read-modify-write, and none is overwritten by a first nerve.yaml.
func TestConcurrentEditsKeepEveryChange(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "nerve.yaml")
	const writers = 16
	var wg sync.WaitGroup
	want := make([]string, writers)
	for i := range writers {
		want[i] = fmt.Sprintf("r%02d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentEditProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "NERVE_TEST_EDIT_FILE="+path, "NERVE_TEST_EDIT_REMOTE="+want[i])
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("writer %s: %v\n%s", want[i], err, out)
			}
		}()
	}
	wg.Wait()
	cfg, err := config.Load(config.LoadOptions{File: path, Getenv: onlyHome(home)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range cfg.Remotes {
		got = append(got, name)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("remotes after %d concurrent writers: %v, want %v", writers, got, want)
	}
}

// onlyHome is an environment with NERVE_HOME=home and nothing else.
func onlyHome(home string) func(string) string {
	return func(k string) string {
		if k == "NERVE_HOME" {
			return home
		}
		return ""
	}
}

// A writer killed between its temp file and the rename leaves the temp
// file; the next writer, holding the lock, removes it.
func TestEditRemovesAKilledWritersTempFile(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "nerve.yaml")
	if _, err := config.WriteInitial(path, "laptop-1"); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(home, ".nerve.yaml.tmp-123456")
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := config.AddRemote(path, "origin", "http://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the killed writer's temp file is still there: %v", err)
	}
}

// Setting a remote's url again keeps what else its owner set on it (the
// repositories its daemon fetches).
func TestSetRemoteKeepsRepos(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nerve.yaml")
	if err := os.WriteFile(path, []byte("remotes:\n  origin:\n    url: http://127.0.0.1:1\n    repos: [\"https://git.example.com/team/*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := config.SetRemote(path, "origin", "http://127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	home := filepath.Dir(path)
	cfg, err := config.Load(config.LoadOptions{File: path, Getenv: func(k string) string {
		if k == "NERVE_HOME" {
			return home
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Remotes["origin"]; r.URL != "http://127.0.0.1:2" || len(r.Repos) != 1 || r.Repos[0] != "https://git.example.com/team/*" {
		t.Fatalf("remote after SetRemote: %+v", r)
	}
}
