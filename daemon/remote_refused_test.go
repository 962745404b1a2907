package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/store"
)

// notHolder answers every request as Khala answers a claim presented by
// an agent it was not leased to.
func notHolder(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error": {"code": "forbidden", "message": "not the holder: turn thread-1.1 is held by another agent"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A heartbeat refused as another agent's stops the turn's adapter, as a
// lost claim does, instead of retrying until the adapter ends.
func TestHeartbeatRefusedAsAnotherAgentsStopsTheTurn(t *testing.T) {
	logger, _ := newTestLog(t)
	r := &runner{d: &Daemon{log: logger}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cl := remote.New("origin", notHolder(t).URL, "tok")
	done := r.heartbeat(ctx, cancel, cl, api.Turn{Turn: "thread-1.1", Claim: "c1", LeaseExpires: time.Now().Add(300 * time.Millisecond)})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat kept retrying a 403")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, errClaimLost) {
		t.Fatalf("turn stopped by %v, want %v", cause, errClaimLost)
	}
}

// A response refused as another agent's leaves the outbox: it would be
// refused again however often it were sent.
func TestOutboxDropsAResponseRefusedAsAnotherAgents(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "nerve.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	it, err := st.Enqueue(store.OutboxItem{Remote: "origin", Turn: "thread-1.1", Thread: "thread-1", Response: api.Response{Claim: "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	logger, _ := newTestLog(t)
	o := newOutbox(&Daemon{log: logger, store: st})
	_, err = remote.New("origin", notHolder(t).URL, "tok").Respond(context.Background(), it.Turn, it.Response)
	if !o.settle(it, err) {
		t.Fatalf("a 403 (%v) was kept for another delivery", err)
	}
	if left, err := st.Outbox(); err != nil || len(left) != 0 {
		t.Fatalf("outbox after the 403: %+v, %v", left, err)
	}
}
