package workspace

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

const helperEnv = "NERVE_WORKSPACE_CRASH_HELPER"

// crashHelper is the test binary run as a daemon that dies by kill -9 in
// the middle of a turn: the agent has committed once and left more
// changes, and Finish never runs.
func crashHelper() {
	var in struct {
		Home string
		Turn Turn
	}
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &in); err != nil {
		panic(err)
	}
	m := &Manager{Home: in.Home}
	tr, err := m.Open(bg, in.Turn)
	if err != nil {
		panic(err)
	}
	os.WriteFile(filepath.Join(tr.Dir, "half.txt"), []byte("half\n"), 0o644)
	if out, err := exec.Command("git", "-C", tr.Dir, "-c", "user.name=a", "-c", "user.email=a@b",
		"commit", "-qam", "agent commit", "--allow-empty").CombinedOutput(); err != nil {
		panic(string(out))
	}
	os.WriteFile(filepath.Join(tr.Dir, "a.txt"), []byte("clobbered\n"), 0o644)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// TestKillMidTurn: a daemon killed by SIGKILL in the middle of a turn;
// after the restart the turn runs again in the same worktree, reset to
// the head it started from, and the branch never saw the half turn.
func TestKillMidTurn(t *testing.T) {
	for _, cloud := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "cloud"}[cloud], func(t *testing.T) {
			repo := newRepo(t)
			if cloud {
				repo = newRemote(t)
			}
			home := t.TempDir()
			m := &Manager{Home: home}
			ws, err := m.Start(bg, Workspace{Repo: repo, Cloud: cloud, Branch: "nerve/w/thread-1"})
			if err != nil {
				t.Fatal(err)
			}
			turn := Turn{Workspace: ws, Key: "w#thread-1", Step: 1}
			arg, _ := json.Marshal(map[string]any{"Home": home, "Turn": turn})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+string(arg))
			out, err := cmd.CombinedOutput()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("helper did not die by SIGKILL: %v\n%s", err, out)
			}

			restarted := &Manager{Home: home}
			tr, err := restarted.Open(bg, turn)
			if err != nil {
				t.Fatal(err)
			}
			if got := gitT(t, tr.Dir, "rev-parse", "HEAD"); got != ws.Head {
				t.Errorf("worktree at %s after the restart; want the turn's start %s", got, ws.Head)
			}
			if st := gitT(t, tr.Dir, "status", "--porcelain", "-uall"); st != "" {
				t.Errorf("worktree not clean after the restart:\n%s", st)
			}
			if got := branchAt(t, repo, ws.Branch); got != pushed(ws) {
				t.Errorf("branch at %s; the half turn reached it (want %s)", got, ws.Head)
			}
			write(t, filepath.Join(tr.Dir, "whole.txt"), "whole\n")
			res, err := tr.Finish(bg, "agent", "author, step 1: again")
			if err != nil {
				t.Fatal(err)
			}
			if files := gitT(t, repo, "show", "--name-only", "--format=", res.Commit); files != "whole.txt" {
				t.Errorf("the re-run turn's commit has %q", files)
			}
		})
	}
}

// TestCrashWhilePublishing: the branch moved but the turn was never
// recorded (the thread still starts the turn from the old head); Open
// puts the branch back, with a lease, before the turn runs again.
func TestCrashWhilePublishing(t *testing.T) {
	remote := newRemote(t)
	m := newManager(t)
	ws, err := m.Start(bg, Workspace{Repo: remote, Cloud: true, Branch: "nerve/w/thread-2"})
	if err != nil {
		t.Fatal(err)
	}
	turn := Turn{Workspace: ws, Key: "w#thread-2", Step: 1}
	tr, err := m.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tr.Dir, "x.txt"), "x\n")
	res, err := tr.Finish(bg, "agent", "author, step 1: x")
	if err != nil {
		t.Fatal(err)
	}
	// Rewind the record to the moment between the push and its record.
	tr.meta.Head = ""
	tr.Start = ws.Head
	if err := tr.save(statePublishing, res.Commit); err != nil {
		t.Fatal(err)
	}
	tr2, err := (&Manager{Home: m.Home}).Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	if got := branchAt(t, remote, ws.Branch); got != pushed(ws) {
		t.Errorf("remote branch at %s; want it back at %s", got, ws.Head)
	}
	if got := gitT(t, tr2.Dir, "rev-parse", "HEAD"); got != ws.Head {
		t.Errorf("worktree at %s; want %s", got, ws.Head)
	}
}

// TestCrashAfterPublish: the daemon died after a turn's Finish moved the
// branch and before the thread recorded the commit, so the turn runs
// again from the old head: the unrecorded commit is taken back off the
// branch (with a lease) and the rerun publishes in its place.
func TestCrashAfterPublish(t *testing.T) {
	for _, cloud := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "cloud"}[cloud], func(t *testing.T) {
			repo := newRepo(t)
			if cloud {
				repo = newRemote(t)
			}
			m := newManager(t)
			ws, err := m.Start(bg, Workspace{Repo: repo, Cloud: cloud, Branch: "nerve/w/thread-1"})
			if err != nil {
				t.Fatal(err)
			}
			turn := Turn{Workspace: ws, Key: "w#thread-1", Step: 1}
			tr, err := m.Open(bg, turn)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(tr.Dir, "first.txt"), "first run\n")
			lost, err := tr.Finish(bg, "agent", "author, step 1: first run")
			if err != nil {
				t.Fatal(err)
			}
			// The crash: the thread never recorded lost.Commit.
			restarted := &Manager{Home: m.Home}
			tr, err = restarted.Open(bg, turn)
			if err != nil {
				t.Fatal(err)
			}
			if got := branchAt(t, repo, ws.Branch); got != pushed(ws) {
				t.Fatalf("branch at %s after the rerun's Open; want the recorded head %s (not %s)", got, ws.Head, lost.Commit)
			}
			write(t, filepath.Join(tr.Dir, "second.txt"), "second run\n")
			res, err := tr.Finish(bg, "agent", "author, step 1: second run")
			if err != nil {
				t.Fatalf("the rerun's Finish: %v", err)
			}
			if got := gitT(t, repo, "rev-parse", "refs/heads/"+ws.Branch); got != res.Commit || gitT(t, repo, "rev-parse", res.Commit+"^") != ws.Head {
				t.Errorf("branch at %s; want the rerun's %s on the recorded head", got, res.Commit)
			}
			// A later turn from the recorded commit keeps it.
			next := Turn{Workspace: ws, Key: "w#thread-1", Step: 2}
			next.Head = res.Commit
			if _, err := restarted.Open(bg, next); err != nil {
				t.Fatal(err)
			}
			if got := gitT(t, repo, "rev-parse", "refs/heads/"+ws.Branch); got != res.Commit {
				t.Errorf("a recorded publication was undone: branch at %s", got)
			}
		})
	}
}
