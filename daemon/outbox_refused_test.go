package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// A 404 that is not Khala's word on the turn (a reverse proxy's plain
// 404 while Khala is redeployed) keeps the answer, and holds back that
// answer only: another one to the same remote is delivered meanwhile, and
// the kept one once the proxy forwards it again. Khala's own 404 (an
// unknown turn) still drops an answer. Before, the proxy's 404 dropped it.
func TestOutboxKeepsAnAnswerAProxyRefuses(t *testing.T) {
	cl, _ := remoteAgent(t, "one", "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nbinding: cloud\nlimits: {claim: 1h}\nroles:\n  w: {prompt: p}\n")
	ctx := context.Background()
	for range 2 {
		if _, err := cl.StartThread(ctx, "one", nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	turns, err := cl.Claim(ctx, api.ClaimRequest{Max: 2}, 5*time.Second)
	if err != nil || len(turns) != 2 {
		t.Fatalf("claim: %v, %d turns", err, len(turns))
	}
	a, b := turns[0], turns[1]

	target, _ := url.Parse(cl.BaseURL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refusing atomic.Bool
	refusing.Store(true)
	var refused atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refusing.Load() && strings.HasPrefix(r.URL.Path, "/v1/turns/"+a.Turn+"/") {
			refused.Add(1)
			http.NotFound(w, r) // "404 page not found", text/plain
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	home := t.TempDir()
	if err := remote.SaveToken(home, "origin", cl.Token); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults(home)
	cfg.Remotes["origin"] = config.Remote{URL: front.URL}
	d, _ := newGatedDaemon(t, cfg)
	d.outbox = newOutbox(d)
	enqueue := func(tt api.Turn) store.OutboxItem {
		t.Helper()
		it, err := d.store.Enqueue(store.OutboxItem{Remote: "origin", Turn: tt.Turn, Thread: tt.Thread,
			Response: api.Response{Claim: tt.Claim, Content: "answer " + tt.Thread}})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	pending := func() int {
		items, err := d.store.Outbox()
		if err != nil {
			t.Fatal(err)
		}
		return len(items)
	}

	if _, sent := d.outbox.sendNow(ctx, enqueue(a)); sent || refused.Load() == 0 {
		t.Fatalf("sent through a refusing proxy: %v, %d refusals", sent, refused.Load())
	}
	if n := pending(); n != 1 {
		t.Fatalf("after the proxy's 404 the outbox holds %d answers, want 1", n)
	}
	if _, sent := d.outbox.sendNow(ctx, enqueue(b)); !sent {
		t.Fatal("one refused answer held back another answer to the same remote")
	}
	gone := enqueue(api.Turn{Turn: "thread-999.1", Thread: "thread-999", Claim: "c"})
	if _, sent := d.outbox.sendNow(ctx, gone); sent || pending() != 1 {
		t.Fatalf("an answer to a turn Khala does not know: sent %v, outbox holds %d (want only the kept one)", sent, pending())
	}

	runCtx, stop := context.WithCancel(ctx)
	loop := make(chan struct{})
	go func() { defer close(loop); d.outbox.run(runCtx) }()
	t.Cleanup(func() { stop(); <-loop })
	waitUntil(t, "the kept answer to be retried", func() bool { return refused.Load() >= 2 })
	refusing.Store(false)
	waitUntil(t, "the kept answer delivered", func() bool { return pending() == 0 })
	for _, tt := range turns {
		msgs, err := cl.Messages(ctx, tt.Thread, workflow.Filter{})
		if err != nil || len(msgs) != 1 || msgs[0].Content != "answer "+tt.Thread {
			t.Fatalf("%s: %+v, %v", tt.Thread, msgs, err)
		}
	}
}

// A 400 is Khala's refusal of the answer for good only with its own code
// (a malformed answer, bad_request or invalid_input); a 400 without one
// (a proxy's) keeps the answer, to be sent again.
func TestOutboxDropsA400OnlyWithKhalasCode(t *testing.T) {
	for body, dropped := range map[string]bool{
		`{"error": {"code": "bad_request", "message": "malformed JSON"}}`:      true,
		`{"error": {"code": "invalid_input", "message": "meta: want object"}}`: true,
		"<html>400 Bad Request</html>":                                         false,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(body))
		}))
		st, err := store.Open(t.TempDir()+"/nerve.db", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		it, err := st.Enqueue(store.OutboxItem{Remote: "origin", Turn: "thread-1.1", Thread: "thread-1", Response: api.Response{Claim: "c1"}})
		if err != nil {
			t.Fatal(err)
		}
		logger, _ := newTestLog(t)
		o := newOutbox(&Daemon{log: logger, store: st})
		_, err = remote.New("origin", srv.URL, "tok").Respond(context.Background(), it.Turn, it.Response)
		if done := o.settle(it, err); done != dropped {
			t.Errorf("400 %s (%v): settled %v, want %v", body, err, done, dropped)
		}
		srv.Close()
		st.Close()
	}
}
