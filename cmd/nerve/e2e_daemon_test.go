package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// slowWorkflow writes a workflow of `steps` turns played by an exec
// adapter running script, and returns the definition's path.
func slowWorkflow(e *env, steps int, script string) string {
	e.write("agent.sh", "#!/bin/sh\n"+script)
	e.write("nerve.yaml", fmt.Sprintf(`adapters:
  slow:
    type: exec
    command: [%s/agent.sh]
    timeout: 60s
daemon:
  shutdown_grace: 3s
`, e.home))
	return e.write("slow.yaml", fmt.Sprintf(`workflow: slow
moderator: '$count(messages) < %d ? {"role": "worker", "instruction": "go"} : {"done": true, "result": $count(messages)}'
roles:
  worker: {adapter: slow, prompt: work}
`, steps))
}

// A thread survives kill -9 of the daemon: on restart it resumes at the
// interrupted turn, which runs again, with no duplicate messages.
func TestE2EKill9ResumesAtInterruptedTurn(t *testing.T) {
	e := newEnv(t)
	e.unsandboxed("its agent logs its runs and keeps its hung-once flag in NERVE_HOME")
	marker := "nerve-test-hang-" + filepath.Base(e.home)
	// Step 2 hangs the first time (until killed); every other run answers.
	def := slowWorkflow(e, 3, fmt.Sprintf(`
echo "run $NERVE_STEP" >> %[1]s/runs.log
if [ "$NERVE_STEP" = 2 ] && [ ! -f %[1]s/hung ]; then
  touch %[1]s/hung
  exec sh -c 'sleep 300' %[2]s
fi
echo "answer $NERVE_STEP"
`, e.home, marker))
	e.must(0, "workflow", "run", def, "--detach")
	waitFor(t, "step 2 to hang", func() bool { return len(processesWith(marker)) > 0 })
	pid := e.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return procstat.Exited(pid) })

	// The next command starts a new daemon, which resumes the thread and
	// kills the adapter left behind by the crash.
	r := e.must(0, "workflow", "logs", "slow#thread-1", "-f")
	if !strings.Contains(r.stdout, "resumed at step 2") || !strings.Contains(r.stdout, "thread-1 completed") {
		t.Fatalf("logs after restart: %s", r)
	}
	runs, _ := os.ReadFile(filepath.Join(e.home, "runs.log"))
	if got := strings.Fields(strings.ReplaceAll(string(runs), "run ", "")); strings.Join(got, ",") != "1,2,2,3" {
		t.Fatalf("turn runs %v, want 1,2,2,3 (only the interrupted turn again)", got)
	}
	msgs := e.must(0, "thread", "messages", "slow#thread-1", "--json")
	if n := strings.Count(msgs.stdout, "\n"); n != 3 {
		t.Fatalf("want 3 messages (no duplicates), got %d:\n%s", n, msgs.stdout)
	}
	waitFor(t, "the stale adapter to be killed", func() bool { return len(processesWith(marker)) == 0 })
}

// SIGTERM: no new turns start, a running turn gets the grace period and,
// past it, its whole process group is killed; the daemon exits 0 and the
// thread resumes on the next start.
func TestE2ESIGTERMGraceThenKill(t *testing.T) {
	e := newEnv(t)
	marker := "nerve-test-term-" + filepath.Base(e.home)
	def := slowWorkflow(e, 2, fmt.Sprintf(`
if [ "$NERVE_STEP" = 1 ] && [ ! -f %[1]s/once ]; then
  touch %[1]s/once
  sh -c 'sleep 301' %[2]s &
  exec sh -c 'sleep 300' %[2]s
fi
echo "answer $NERVE_STEP"
`, e.home, marker))
	// A foreground daemon, so its exit status is ours to see.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := exec.CommandContext(ctx, nerveBin(t), "daemon")
	d.Env = append(os.Environ(), "NERVE_HOME="+e.home)
	logf, _ := os.Create(filepath.Join(e.home, "fg.log"))
	defer logf.Close()
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon", func() bool { return e.daemonPID() == d.Process.Pid })
	e.must(0, "workflow", "run", def, "--detach")
	waitFor(t, "the turn and its grandchild", func() bool { return len(processesWith(marker)) == 2 })

	start := time.Now()
	d.Process.Signal(syscall.SIGTERM)
	err := d.Wait()
	took := time.Since(start)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(e.home, "fg.log"))
		t.Fatalf("daemon exit after SIGTERM: %v\n%s", err, log)
	}
	if took < 2*time.Second || took > 15*time.Second {
		t.Fatalf("shutdown took %s; want the 3s grace, then a kill", took)
	}
	if left := processesWith(marker); len(left) != 0 {
		t.Fatalf("processes of the killed turn survive: %v", left)
	}
	// Restarted, the thread resumes at step 1 and completes.
	r := e.must(0, "workflow", "logs", "slow#thread-1", "-f")
	if !strings.Contains(r.stdout, "thread-1 completed") {
		t.Fatalf("after restart: %s", r)
	}
}

func TestE2ECancelKillsTheAdapterGroup(t *testing.T) {
	e := newEnv(t)
	marker := "nerve-test-cancel-" + filepath.Base(e.home)
	def := slowWorkflow(e, 1, fmt.Sprintf("sh -c 'sleep 301' %[1]s &\nexec sh -c 'sleep 300' %[1]s\n", marker))
	e.must(0, "workflow", "run", def, "--detach")
	waitFor(t, "the turn", func() bool { return len(processesWith(marker)) == 2 })
	r := e.must(0, "workflow", "cancel", "slow#thread-1")
	if strings.TrimSpace(r.stdout) != "slow#thread-1 cancelled" {
		t.Fatalf("cancel: %s", r)
	}
	waitFor(t, "the group to die", func() bool { return len(processesWith(marker)) == 0 })
	e.must(1, "workflow", "logs", "slow#thread-1", "-f") // ended, not completed
	// Cancelling an ended thread is done already, as docker stop has it.
	r = e.must(0, "workflow", "cancel", "slow#thread-1")
	if r.stdout != "slow#thread-1 already ended (cancelled)\n" || r.stderr != "" {
		t.Fatalf("second cancel: %s", r)
	}
}

// An attached run survives its CLI: killing the CLI leaves the thread
// running in the daemon.
func TestE2EThreadOutlivesTheCLI(t *testing.T) {
	e := newEnv(t)
	def := slowWorkflow(e, 2, "sleep 2\necho done\n")
	cmd := exec.Command(nerveBin(t), "workflow", "run", def)
	cmd.Env = append(os.Environ(), "NERVE_HOME="+e.home)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the thread to start", func() bool {
		if _, err := os.Stat(filepath.Join(e.home, "nerve.pid")); err != nil {
			return false
		}
		return strings.Contains(e.run("workflow", "logs", "slow").stdout, "slow#thread-1")
	})
	cmd.Process.Kill()
	cmd.Wait()
	r := e.must(0, "workflow", "logs", "slow#thread-1", "-f")
	if !strings.Contains(r.stdout, "completed") {
		t.Fatalf("thread did not finish without its CLI: %s", r)
	}
}

func TestE2ESecondDaemonRefused(t *testing.T) {
	e := newEnv(t)
	e.must(0, "daemon", "start")
	r := e.must(2, "daemon")
	if !strings.Contains(r.stderr, "already running") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
		t.Fatalf("second daemon: %s", r)
	}
	r = e.must(0, "daemon", "start")
	if !strings.Contains(r.stdout, "already running") {
		t.Fatalf("daemon start twice: %s", r)
	}
	fi, err := os.Stat(filepath.Join(e.home, "nerve.sock"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	db, _ := os.Stat(filepath.Join(e.home, "nerve.db"))
	if db.Mode().Perm() != 0o600 {
		t.Fatalf("nerve.db mode %v", db.Mode())
	}
}

func TestE2EStaleSocketAndNoAutostart(t *testing.T) {
	e := newEnv(t)
	e.extra = []string{"NERVE_NO_AUTOSTART=1"}
	r := e.must(1, "workflow", "logs", "x#thread-1")
	if !strings.Contains(r.stderr, "NERVE_NO_AUTOSTART=1") || !strings.Contains(r.stderr, "hint:") {
		t.Fatalf("no autostart: %s", r)
	}
	// A socket file nobody listens on (a crashed daemon's) is replaced.
	os.WriteFile(filepath.Join(e.home, "nerve.sock"), nil, 0o600)
	e.extra = nil
	e.must(0, "daemon", "start")
	e.must(0, "daemon", "status")
}

// nerve.yaml is reloaded live: a valid change is taken, an invalid one is
// refused and reported while the old config stays in force.
func TestE2EHotReload(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {max_concurrent_turns: 2}\n")
	e.must(0, "daemon", "start")
	capacity := func() string {
		r := e.must(0, "daemon", "status", "--json")
		return r.stdout
	}
	e.write("nerve.yaml", "agent: {max_concurrent_turns: 5}\n")
	waitFor(t, "the valid change", func() bool { return strings.Contains(capacity(), `"capacity":5`) })
	e.write("nerve.yaml", "agent: {max_concurrent_turns: 0}\n")
	waitFor(t, "the invalid change to be reported", func() bool { return strings.Contains(capacity(), "must be at least 1") })
	if !strings.Contains(capacity(), `"capacity":5`) {
		t.Fatal("an invalid file must leave the old config in force")
	}
	r := e.must(0, "daemon", "status")
	if !strings.Contains(r.stdout, "LAST RELOAD FAILED") {
		t.Fatalf("status does not report the failed reload: %s", r)
	}
}

// An interval sense with a do: workflow reflex starts local threads.
func TestE2EIntervalReflexStartsWorkflows(t *testing.T) {
	e := newEnv(t)
	src, _ := os.ReadFile(repoFile(t, "examples/code-review.yaml"))
	e.write("workflows/code-review.yaml", string(src))
	mod, _ := os.ReadFile(repoFile(t, "examples/code-review.jsonata"))
	e.write("workflows/code-review.jsonata", string(mod))
	e.write("nerve.yaml", `senses:
  - {name: tick, kind: interval, every: 1s}
reflexes:
  - {on: tick, do: workflow, workflow: code-review, input: {change: "nightly sweep"}}
`)
	e.must(0, "daemon", "start")
	waitFor(t, "a thread started by the reflex to complete", func() bool {
		return strings.Contains(e.must(0, "workflow", "logs", "code-review").stdout, "completed")
	})
	st := e.must(0, "daemon", "status", "--json")
	if !strings.Contains(st.stdout, `"name":"tick"`) {
		t.Fatalf("status: %s", st)
	}
}

// Ctrl-C ends daemon stop's wait for the daemon's exit, not the shutdown:
// exit 130 and one line saying the daemon goes on stopping.
func TestE2EDaemonStopCtrlC(t *testing.T) {
	e := newEnv(t)
	marker := "nerve-test-stopint-" + filepath.Base(e.home)
	def := slowWorkflow(e, 1, fmt.Sprintf("exec sh -c 'sleep 300' %s\n", marker))
	// A grace long enough that the daemon is still draining when we interrupt.
	cfg, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml"))
	e.write("nerve.yaml", strings.Replace(string(cfg), "shutdown_grace: 3s", "shutdown_grace: 60s", 1))
	e.must(0, "workflow", "run", def, "--detach")
	waitFor(t, "the turn", func() bool { return len(processesWith(marker)) == 1 })
	pid := e.daemonPID()
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		for _, p := range processesWith(marker) {
			syscall.Kill(-p, syscall.SIGKILL)
			syscall.Kill(p, syscall.SIGKILL)
		}
	})

	stop := exec.Command(nerveBin(t), "daemon", "stop")
	stop.Env = append(os.Environ(), "NERVE_HOME="+e.home)
	var out, errb strings.Builder
	stop.Stdout, stop.Stderr = &out, &errb
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	// The daemon logs that it is shutting down (draining the turn for
	// its grace): daemon stop has asked and is waiting.
	waitFor(t, "the daemon to start shutting down", func() bool {
		log, _ := os.ReadFile(filepath.Join(e.home, "nerve.log"))
		return strings.Contains(string(log), "shutting down")
	})
	stop.Process.Signal(os.Interrupt)
	err := stop.Wait()
	if code := stop.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("daemon stop after Ctrl-C: exit %d (%v), want 130\nstdout: %s\nstderr: %s", code, err, out.String(), errb.String())
	}
	want := fmt.Sprintf("stopped waiting; the daemon (pid %d) goes on shutting down ('nerve daemon status' shows when it is gone)\n", pid)
	if errb.String() != want || out.String() != "" {
		t.Fatalf("daemon stop after Ctrl-C:\nstdout: %q\nstderr: %q\nwant stderr %q", out.String(), errb.String(), want)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the daemon exited: the test interrupted nothing")
	}
}
