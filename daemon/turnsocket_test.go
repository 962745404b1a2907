package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/sense"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// turnSocketDaemon is a daemon's runner and store over a fresh NERVE_HOME
// with a workflow "child" (one turn of `true`), a running thread of it
// (the turn's), another running thread, and a child of the turn's thread.
func turnSocketDaemon(t testing.TB) (d *Daemon, own, other, child *workflow.Thread) {
	t.Helper()
	home, err := os.MkdirTemp("", "nts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	cfg := config.Defaults(home)
	cfg.Workflows = []string{filepath.Join(home, "workflows")}
	cfg.Adapters["true"] = config.Adapter{Type: "exec", Command: []string{"true"}}
	os.MkdirAll(cfg.Workflows[0], 0o700)
	src := "workflow: child\nmoderator: 'last = null ? {\"role\": \"w\", \"instruction\": \"go\"} : {\"done\": true}'\nroles:\n  w: {adapter: \"true\", prompt: work}\n"
	if err := os.WriteFile(filepath.Join(cfg.Workflows[0], "child.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(config.Paths{Home: cfg.Home}.DB(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d = &Daemon{paths: config.Paths{Home: cfg.Home}, log: slog.New(slog.DiscardHandler), store: st, cfg: cfg,
		capacity: sense.NewCapacity(cfg.Agent.MaxConcurrentTurns)}
	d.gate = reflex.NewGate(d.config, st, d.log)
	ctx, cancel := context.WithCancel(context.Background())
	d.runner = newRunner(d, ctx)
	t.Cleanup(func() { cancel(); d.runner.wait(); st.Close() })
	def, err := workflow.Parse("child.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(parent *workflow.Thread) *workflow.Thread {
		th := &workflow.Thread{Workflow: "child", Status: workflow.StatusRunning, Source: def.Source, Step: 1}
		if parent != nil {
			th.Parent = &workflow.Parent{Ref: "child#" + parent.ID, Thread: parent.ID}
			th.Depth = 1
		}
		if err := d.store.CreateThread(th); err != nil {
			t.Fatal(err)
		}
		return th
	}
	own = mk(nil)
	other = mk(nil)
	child = mk(own)
	if err := d.store.Commit(workflow.Update{Thread: own, Messages: []workflow.Message{{Step: 1, Role: "w", Agent: "a", Content: "own message", At: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	return d, own, other, child
}

// openTurnSocket opens the socket of step 1 of th (a ref's), working in
// workdir, and returns its client; the socket closes with the test.
func openTurnSocket(t *testing.T, d *Daemon, ref string, workdir string, history []workflow.Message) (*Client, string, func()) {
	t.Helper()
	ts := newTurnSockets(d)
	path, end, err := ts.forTurn(&reflex.Turn{Ref: ref, Step: 1, History: history, Workdir: workdir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(end)
	return NewTurnClient(path), path, end
}

// wantRefused fails unless err is the socket's 403 saying want.
func wantRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Message, want) || ae.ExitCode() != 1 {
		t.Errorf("%s: got %v, want a 403 saying %q", what, err, want)
	}
}

// A local turn's socket serves its own thread, the children it started,
// notices and child starts where the turn works; it refuses, with 403
// and a sentence, every answer, another thread, the list of threads, the
// daemon's status, its shutdown and its inbox.
func TestTurnSocketServesTheTurnOnly(t *testing.T) {
	d, own, other, child := turnSocketDaemon(t)
	workdir := t.TempDir()
	c, path, _ := openTurnSocket(t, d, "child#"+own.ID, workdir, nil)
	ctx := context.Background()

	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %s: %v %v", path, fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 || filepath.Dir(path) != filepath.Join(d.paths.Home, "turns") {
		t.Fatalf("socket directory: %v %v", fi.Mode(), err)
	}
	if len(path) > maxSocketPath {
		t.Fatalf("socket path %d bytes", len(path))
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := c.Turn(ctx); err != nil || info.Thread != "child#"+own.ID || info.Step != 1 {
		t.Fatalf("turn %+v %v", info, err)
	}
	if th, err := c.Thread(ctx, own.ID); err != nil || th.ID != own.ID || th.Source != nil {
		t.Fatalf("own thread %+v %v", th, err)
	}
	if ms, err := c.Messages(ctx, own.ID, workflow.Filter{}); err != nil || len(ms) != 1 || ms[0].Content != "own message" {
		t.Fatalf("own messages %+v %v", ms, err)
	}
	if th, err := c.Thread(ctx, child.ID); err != nil || th.ID != child.ID {
		t.Fatalf("a child %+v %v", th, err)
	}
	if err := c.Notify(ctx, NotifyRequest{Thread: "child#" + own.ID, Step: 7, Level: "info", Message: "halfway"}); err != nil {
		t.Fatal(err)
	}
	evs, _ := d.store.Events(own.ID, 0)
	if e := evs[len(evs)-1]; e.Message != "halfway" || e.Step != 1 {
		t.Fatalf("the notice is %+v, want it at the turn's step 1", e)
	}

	wantRefused(t, "another thread", errOf(c.Thread(ctx, other.ID)), "a turn reads only its own thread (child#"+own.ID+") and the children it started, not "+other.ID)
	wantRefused(t, "another's messages", errOf(c.Messages(ctx, other.ID, workflow.Filter{})), "not "+other.ID)
	wantRefused(t, "another's events", c.Events(ctx, other.ID, 0, false, func(workflow.Event) error { return nil }), "not "+other.ID)
	wantRefused(t, "cancel its own thread", errOf(c.Cancel(ctx, own.ID)), "not "+own.ID)
	wantRefused(t, "cancel another", errOf(c.Cancel(ctx, other.ID)), "not "+other.ID)
	wantRefused(t, "notify another", c.Notify(ctx, NotifyRequest{Thread: "child#" + other.ID, Level: "info", Message: "x"}), "a turn notifies its own thread")
	wantRefused(t, "answer its own thread", errOf(c.Answer(ctx, own.ID, AnswerRequest{Content: "yes"})), "an agent never approves its own work")
	wantRefused(t, "may answer", c.MayAnswer(ctx), "refused: this answer comes from inside a running turn (child#"+own.ID+" step 1)")
	wantRefused(t, "list threads", errOf(c.Threads(ctx, "", "", 0)), "not GET /v1/threads")
	wantRefused(t, "status", errOf(c.Status(ctx)), "not GET /v1/status")
	wantRefused(t, "shutdown", errOf(c.Shutdown(ctx)), "not POST /v1/shutdown")
	wantRefused(t, "inbox", errOf(c.Inbox(ctx)), "not GET /v1/inbox")
	if st, _ := d.store.Thread(own.ID); st.Status != workflow.StatusRunning {
		t.Fatalf("the turn's thread is %s", st.Status)
	}

	// Children: where the turn works, not elsewhere, and not through a
	// link the agent made to elsewhere.
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(workdir, "away"))
	os.WriteFile(filepath.Join(outside, "def.yaml"), []byte("workflow: x\n"), 0o600)
	wantRefused(t, "a child elsewhere", errOf(c.Start(ctx, StartRequest{Workflow: "child", Workdir: outside})), "a turn's child works where the turn does ("+workdir+"), not in "+outside)
	wantRefused(t, "a child through a link", errOf(c.Start(ctx, StartRequest{Workflow: "child", Workdir: filepath.Join(workdir, "away")})), "not in "+workdir+"/away")
	wantRefused(t, "a definition elsewhere", errOf(c.Start(ctx, StartRequest{File: filepath.Join(workdir, "away", "def.yaml"), Workdir: workdir})), "a turn starts a definition file from where it works")
	wantRefused(t, "a repository elsewhere", errOf(c.Start(ctx, StartRequest{Workflow: "child", Workdir: workdir, Workspace: &WorkspaceRequest{Repo: outside}})), "a turn's child works in a repository where the turn works")
	wantRefused(t, "knowledge elsewhere", errOf(c.KnowledgeQuery(ctx, KnowledgeQueryRequest{Roots: []string{outside}, Text: "x"})), "a turn queries the knowledge of repositories where it works")
	kid, err := c.Start(ctx, StartRequest{Workflow: "child", Workdir: workdir, Parent: other.ID})
	if err != nil {
		t.Fatal(err)
	}
	if kid.Parent == nil || kid.Parent.Thread != own.ID || kid.Parent.Turn != 1 || kid.Depth != 1 {
		t.Fatalf("the child's parent is %+v (depth %d), want the turn's thread, whatever the request said", kid.Parent, kid.Depth)
	}
	if err := c.Events(ctx, kid.ID, 0, true, func(workflow.Event) error { return nil }); err != nil {
		t.Fatalf("follow the child: %v", err)
	}
	if th, err := c.Thread(ctx, kid.ID); err != nil || th.Status != workflow.StatusCompleted {
		t.Fatalf("the child it started: %+v %v", th, err)
	}
}

func errOf[T any](_ T, err error) error { return err }

// When the turn ends its socket is gone, file and directory, and a
// connection still open (a follow of the thread's events, as an escaped
// process could keep) is cut off at once: nothing of the turn's rights
// outlives it.
func TestTurnSocketEndsWithTheTurn(t *testing.T) {
	d, own, _, _ := turnSocketDaemon(t)
	c, path, end := openTurnSocket(t, d, "child#"+own.ID, t.TempDir(), nil)
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/threads/%s/events?follow=1 HTTP/1.1\r\nHost: %s\r\n\r\n", own.ID, apiHost)
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("follow: %q %v", line, err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := br.ReadString(0) // until the server cuts it
		ended <- err
	}()
	start := time.Now()
	end()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection open at the turn's end was not cut off")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("closing the socket took %s", took)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the turn's socket is still there: %v", err)
	}
	err = c.Ping(context.Background())
	var nr *NotRunningError
	if !errors.As(err, &nr) || !nr.Turn || !strings.Contains(err.Error(), "the turn's channel to nerve does not answer") || !strings.Contains(err.Error(), "its turn has ended") {
		t.Fatalf("after the turn: %v", err)
	}
	end() // twice is harmless
}

// A remote turn's socket serves its own thread's messages from the turn's
// copy (this daemon keeps no record of the thread, and inside a sandbox
// the agent holds no token of the remote), refuses every local thread,
// and refuses to start local workflows.
func TestTurnSocketRemoteTurn(t *testing.T) {
	d, own, _, _ := turnSocketDaemon(t)
	hist := []workflow.Message{{Step: 1, Role: "a", Content: "first"}, {Step: 2, Role: "b", Content: "second"}}
	c, _, _ := openTurnSocket(t, d, "origin/review#thread-9", t.TempDir(), hist)
	ctx := context.Background()
	if ms, err := c.Messages(ctx, "thread-9", workflow.Filter{Last: 1}); err != nil || len(ms) != 1 || ms[0].Content != "second" {
		t.Fatalf("own messages %+v %v", ms, err)
	}
	if th, err := c.Thread(ctx, "thread-9"); err != nil || th.Workflow != "review" || th.Status != workflow.StatusRunning {
		t.Fatalf("own thread %+v %v", th, err)
	}
	wantRefused(t, "a local thread", errOf(c.Thread(ctx, own.ID)), "a remote turn (origin/review#thread-9) reads only its own thread's messages here")
	wantRefused(t, "a local start", errOf(c.Start(ctx, StartRequest{Workflow: "child"})), "a remote turn (origin/review#thread-9) may not start this machine's local workflows")
	wantRefused(t, "an answer", errOf(c.Answer(ctx, "thread-9", AnswerRequest{Content: "yes"})), "an agent never approves its own work")
}

// A daemon that starts sweeps what a crashed one left among the turns'
// sockets; a NERVE_HOME too long for a turn's socket path puts them in
// the temporary directory instead, under this user's and home's name.
func TestTurnSocketSweepAndLongHome(t *testing.T) {
	d, own, _, _ := turnSocketDaemon(t)
	base := turnSocketBase(d.paths.Home)
	if base != filepath.Join(d.paths.Home, "turns") {
		t.Fatalf("base %s", base)
	}
	stale := filepath.Join(base, "0123456789abcdef.sock")
	os.MkdirAll(base, 0o700)
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // what a crash leaves: a socket file nobody serves
	openTurnSocket(t, d, "child#"+own.ID, "", nil)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a crashed daemon's turn socket is still there: %v", err)
	}
	if fi, err := os.Lstat(base); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Fatalf("the sockets' directory: %v %v", fi.Mode(), err)
	}

	long := "/" + strings.Repeat("h", 85)
	lb := turnSocketBase(long)
	if !strings.HasPrefix(lb, os.TempDir()) || lb == turnSocketBase(long+"x") || len(lb)+1+turnSocketNameLen > maxSocketPath {
		t.Fatalf("a long home's sockets go to %s", lb)
	}
	if turnSocketBase("/"+strings.Repeat("h", 80)) == lb {
		t.Fatal("two homes share a directory")
	}
}
