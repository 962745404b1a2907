package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A remote run that no agent claims says so, then says so again (the
// schedule shortened by NERVE_UNCLAIMED_HINTS), not once and then silence.
func TestE2EUnclaimedRemoteTurnReminds(t *testing.T) {
	k := startKhala(t)
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {name: pusher}\nremotes:\n  origin: {url: \""+k.url+"\"}\n")
	e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", k.enrollToken(t, 1))
	e.must(0, "workflow", "push", e.write("lonely.yaml", "workflow: lonely\nmoderator: 'last = null ? {\"role\": \"author\"} : {\"done\": true}'\nroles:\n  author: {adapter: claude, prompt: p}\n"), "origin")

	cmd := exec.Command(nerveBin(t), "workflow", "run", "origin/lonely")
	cmd.Env = append(os.Environ(), "NERVE_HOME="+e.home, "NERVE_UNCLAIMED_HINTS=300ms,300ms,600ms")
	cmd.Dir = e.home
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	waitFor(t, "the fourth reminder", func() bool { return strings.Contains(stderr.String(), "after 2.4s") })
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("workflow run did not stop on SIGINT")
	}
	want := []string{
		"origin/lonely#thread-1 started; follow it elsewhere with 'nerve workflow logs origin/lonely#thread-1 -f'",
		"step 1  author  waiting 300ms for an agent to claim it; agents serve origin with a running daemon whose nerve.yaml has a khala sense of it and a do: turn reflex",
		"step 1  author  still unclaimed after 600ms; no agent serves origin",
		"step 1  author  still unclaimed after 1.2s; no agent serves origin",
		"step 1  author  still unclaimed after 1.8s; no agent serves origin",
		"step 1  author  still unclaimed after 2.4s; no agent serves origin",
	}
	got := strings.Split(stderr.String(), "\n")
	if len(got) < len(want) || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("stderr:\n%s\nwant it to begin:\n%s", stderr.String(), strings.Join(want, "\n"))
	}
}
