package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// runKhala serves a real Khala on addr over db until the returned stop.
func runKhala(t *testing.T, addr, db string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- khala.Serve(ctx, khala.ServeOptions{Addr: addr, DB: db, Ready: func(u string) { ready <- u }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("khala: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("khala did not start")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// 1,000 responses written while the remote is down are all delivered, once
// each, after it returns.
func TestOutboxDeliversAfterTheRemoteReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 threads")
	}
	const n = 1000
	ctx := context.Background()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	kdb := filepath.Join(t.TempDir(), "khala.db")
	stopKhala := runKhala(t, addr, kdb)
	url := "http://" + addr

	tok, _, err := khala.IssueToken(ctx, kdb, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl := remote.New("origin", url, "")
	agentTok, err := cl.Enroll(ctx, tok.Token, "outbox-agent")
	if err != nil {
		t.Fatal(err)
	}
	cl.Token = agentTok
	src := "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nbinding: cloud\nlimits: {claim: 1h}\nroles:\n  w: {prompt: p}\n"
	if _, err := cl.PutWorkflow(ctx, "one", []byte(src)); err != nil {
		t.Fatal(err)
	}
	threads := map[string]bool{}
	for i := 0; i < n; i++ {
		id, err := cl.StartThread(ctx, "one", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		threads[id] = true
	}
	var turns []api.Turn
	for len(turns) < n {
		got, err := cl.Claim(ctx, api.ClaimRequest{Max: 100}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, got...)
	}

	// The remote goes down; the daemon's outbox holds every answer.
	stopKhala()
	home, _ := os.MkdirTemp("", "ob")
	defer os.RemoveAll(home)
	paths := config.Paths{Home: home}
	st, err := store.Open(paths.DB(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range turns {
		if _, err := st.Enqueue(store.OutboxItem{Remote: "origin", Turn: tt.Turn, Thread: tt.Thread,
			Response: api.Response{Claim: tt.Claim, Content: "answer " + tt.Thread}}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	if err := remote.SaveToken(home, "origin", agentTok); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults(home)
	cfg.Remotes["origin"] = config.Remote{URL: url}
	dctx, stopDaemon := context.WithCancel(ctx)
	ddone := make(chan error, 1)
	logger, logs := newTestLog(t)
	failed := logs.logged("outbox: remote unavailable; responses kept and retried")
	go func() { ddone <- Run(dctx, Options{Config: cfg, Logger: logger}) }()
	defer func() { stopDaemon(); <-ddone }()
	dc := NewClient(paths.Socket())
	waitUntil(t, "the daemon", func() bool { return dc.Ping(ctx) == nil })
	select { // a delivery round failed while the remote was down
	case <-failed:
	case <-time.After(30 * time.Second):
		t.Fatal("the outbox never tried the remote while it was down")
	}
	if s, _ := dc.Status(ctx); s.Outbox != n {
		t.Fatalf("outbox holds %d, want %d", s.Outbox, n)
	}

	runKhala(t, addr, kdb) // back
	back := time.Now()
	waitUntil(t, "the outbox to drain", func() bool {
		s, err := dc.Status(ctx)
		return err == nil && s.Outbox == 0
	})
	t.Logf("%d responses delivered %s after the remote returned", n, time.Since(back).Round(time.Millisecond))
	for id := range threads {
		msgs, err := cl.Messages(ctx, id, workflow.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		th, err := cl.Thread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Content != "answer "+id || th.Status != "completed" {
			t.Fatalf("%s: %d messages, status %s", id, len(msgs), th.Status)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
