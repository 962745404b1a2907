package main

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// Flag parsing, captured through runF: no daemon, no binary.
func TestWorkflowRunFlags(t *testing.T) {
	io, _, _ := TestStreams()
	f := newFactory(io)
	var got *workflowRunOptions
	cmd := newCmdWorkflowRun(f, func(o *workflowRunOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"code-review", "-i", "change=x", "--input", "max_rounds=2", "--detach", "--json", "--workdir", "/tmp"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Ref != "code-review" || len(got.Inputs) != 2 || !got.Detach || !got.JSON || got.Workdir != "/tmp" {
		t.Fatalf("options: %+v", got)
	}
}

func TestThreadMessagesFlags(t *testing.T) {
	io, _, _ := TestStreams()
	f := newFactory(io)
	var got *threadMessagesOptions
	cmd := newCmdThreadMessages(f, func(o *threadMessagesOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--role", "reviewer", "--last", "3", "--since", "10m", "--step", "2", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Ref != "" || got.Role != "reviewer" || got.Last != 3 || got.Since != "10m" || got.Step != 2 || !got.JSON {
		t.Fatalf("options: %+v", got)
	}
}

func TestParseInputs(t *testing.T) {
	in, err := parseInputs([]string{"a=1", "b=x=y"}, "")
	if err != nil || in["a"] != "1" || in["b"] != "x=y" {
		t.Fatalf("%v %v", in, err)
	}
	if _, err := parseInputs([]string{"=x"}, ""); err == nil || exitCodeOf(err) != exitUsage {
		t.Fatalf("empty name: %v", err)
	}
}

func TestMainMapsErrors(t *testing.T) {
	io, out, errOut := TestStreams()
	if code := Main([]string{"workflow", "run"}, io); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	if out.Len() != 0 || !strings.HasPrefix(errOut.String(), "nerve: ") || strings.Count(errOut.String(), "\n") != 2 {
		t.Fatalf("want one error line and one hint line, got %q", errOut.String())
	}
	io, _, errOut = TestStreams()
	if code := Main([]string{"thread", "messages", "--last", "x"}, io); code != exitUsage || !strings.Contains(errOut.String(), `--last "x": want a whole number`) {
		t.Fatalf("bad flag value: %d %q", code, errOut.String())
	}
}

// On a TTY, progress redraws one status line in place and prints a line
// per finished turn; elsewhere it prints plain lines only.
func TestProgressRendering(t *testing.T) {
	now := time.Now()
	events := []workflow.Event{
		{Type: workflow.EventTurnStarted, Step: 1, Role: "author", Adapter: "claude", At: now},
		{Type: workflow.EventTurnAnswered, Step: 1, Role: "author", Adapter: "claude", At: now.Add(1500 * time.Millisecond)},
		{Type: workflow.EventTurnStarted, Step: 2, Role: "reviewer", Adapter: "codex", At: now},
	}
	io, _, errOut := TestStreams()
	io.SetTTY(true)
	p := newProgress(io, "code-review#thread-1")
	for _, e := range events {
		p.Event(e)
	}
	p.Close()
	got := errOut.String()
	for _, want := range []string{"\r\033[K", "step 1 author (claude)", "step 1  author  answered in 1.5s (claude)", "step 2 reviewer (codex)"} {
		if !strings.Contains(got, want) {
			t.Fatalf("TTY progress lacks %q: %q", want, got)
		}
	}
	io, _, errOut = TestStreams()
	p = newProgress(io, "code-review#thread-1")
	for _, e := range events {
		p.Event(e)
	}
	p.Close()
	if strings.Contains(errOut.String(), "\r") || strings.Count(errOut.String(), "\n") != 3 {
		t.Fatalf("plain progress: %q", errOut.String())
	}
}

// A remote thread's progress names the agent that claimed a turn, says
// when a lease ran out, and says so when a queued turn waits unclaimed
// (nobody serves the remote).
func TestProgressRemote(t *testing.T) {
	// In a bubble the hint's timer runs on the bubble's clock: waiting
	// out unclaimedHint costs no time, and what has fired is settled.
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		io, _, errOut := TestStreams()
		p := newProgress(io, "origin/code-review#thread-1")
		p.remote = "origin"
		p.Event(workflow.Event{Type: khalaTurnQueued, Step: 1, Role: "author", At: now})
		p.Event(workflow.Event{Type: workflow.EventTurnStarted, Step: 1, Role: "author", Agent: "laptop-1", At: now})
		p.Event(workflow.Event{Type: khalaTurnExpired, Step: 1, Role: "author", Agent: "laptop-1", At: now})
		time.Sleep(unclaimedHints[0] + time.Second) // step 1's second wait outlasts the hint
		synctest.Wait()
		p.Event(workflow.Event{Type: workflow.EventTurnStarted, Step: 1, Role: "author", Agent: "desk-2", At: now})
		p.Event(workflow.Event{Type: workflow.EventTurnAnswered, Step: 1, Role: "author", Agent: "desk-2", Adapter: "claude", At: now})
		p.Event(workflow.Event{Type: khalaTurnQueued, Step: 2, Role: "reviewer", At: now})
		p.Close()
		time.Sleep(20 * time.Minute) // a hint armed past Close would show now
		synctest.Wait()
		got := errOut.String()
		for _, want := range []string{
			"step 1  author  started (laptop-1)",
			"step 1  author  the lease of laptop-1 ran out; queued again",
			"step 1  author  waiting 10.0s for an agent to claim it; agents serve origin with a running daemon",
			"step 1  author  started (desk-2)",
			"step 1  author  answered in 0ms (claude)",
		} {
			if !strings.Contains(got, want) {
				t.Fatalf("remote progress lacks %q:\n%s", want, got)
			}
		}
		if strings.Count(got, "waiting") != 1 {
			t.Fatalf("want one hint (step 1's second wait), got:\n%s", got)
		}
	})
}

// A turn that stays unclaimed is named again at a minute, then every five
// minutes, in a shorter line: not once and then silence.
func TestProgressRemindsWhileUnclaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		io, _, errOut := TestStreams()
		p := newProgress(io, "origin/code-review#thread-1")
		p.remote = "origin"
		p.Event(workflow.Event{Type: khalaTurnQueued, Step: 1, Role: "author", At: time.Now()})
		time.Sleep(11*time.Minute + time.Second)
		synctest.Wait()
		p.Event(workflow.Event{Type: workflow.EventTurnStarted, Step: 1, Role: "author", Agent: "late", At: time.Now()})
		time.Sleep(20 * time.Minute) // claimed: no more reminders
		synctest.Wait()
		p.Close()
		want := "step 1  author  waiting 10.0s for an agent to claim it; agents serve origin with a running daemon whose nerve.yaml has a khala sense of it and a do: turn reflex\n" +
			"step 1  author  still unclaimed after 1m0s; no agent serves origin\n" +
			"step 1  author  still unclaimed after 6m0s; no agent serves origin\n" +
			"step 1  author  still unclaimed after 11m0s; no agent serves origin\n" +
			"step 1  author  started (late)\n"
		if got := errOut.String(); got != want {
			t.Fatalf("got:\n%s\nwant:\n%s", got, want)
		}
	})
}

func TestParseHints(t *testing.T) {
	if got := parseHints("200ms, 1s"); len(got) != 2 || got[0] != 200*time.Millisecond || got[1] != time.Second {
		t.Fatalf("parseHints: %v", got)
	}
	for _, bad := range []string{"x", "1s,0s", "-1s"} {
		if got := parseHints(bad); len(got) != len(unclaimedHints) {
			t.Fatalf("parseHints(%q) = %v, want the default", bad, got)
		}
	}
}
