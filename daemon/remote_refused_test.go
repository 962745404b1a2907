package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/store"
)

// forbidding answers every request 403 with code: not_holder as Khala
// answers a claim presented by an agent it was not leased to, forbidden as
// a proxy or firewall in between might. It counts the requests.
func forbidding(t *testing.T, code string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error": {"code": "` + code + `", "message": "refused"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// A heartbeat refused as another agent's stops the turn's adapter, as a
// lost claim does, instead of retrying until the adapter ends.
func TestHeartbeatRefusedAsAnotherAgentsStopsTheTurn(t *testing.T) {
	logger, _ := newTestLog(t)
	r := &runner{d: &Daemon{log: logger}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	srv, _ := forbidding(t, api.CodeNotHolder)
	cl := remote.New("origin", srv.URL, "tok")
	done := r.heartbeat(ctx, cancel, cl, api.Turn{Turn: "thread-1.1", Claim: "c1", LeaseExpires: time.Now().Add(300 * time.Millisecond)})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat kept retrying a 403 not_holder")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, errClaimLost) {
		t.Fatalf("turn stopped by %v, want %v", cause, errClaimLost)
	}
}

// Any other 403 (a proxy's) says nothing of the claim: the turn keeps
// running and its heartbeat is retried, as a failed heartbeat is.
func TestHeartbeatRefusedOtherwiseIsRetried(t *testing.T) {
	logger, _ := newTestLog(t)
	r := &runner{d: &Daemon{log: logger}}
	ctx, cancel := context.WithCancelCause(context.Background())
	srv, beats := forbidding(t, "forbidden")
	cl := remote.New("origin", srv.URL, "tok")
	done := r.heartbeat(ctx, cancel, cl, api.Turn{Turn: "thread-1.1", Claim: "c1", LeaseExpires: time.Now().Add(300 * time.Millisecond)})
	waitUntil(t, "three heartbeats", func() bool {
		if cause := context.Cause(ctx); cause != nil {
			t.Fatalf("a proxy's 403 stopped the turn: %v", cause)
		}
		return beats.Load() >= 3
	})
	cancel(nil)
	<-done
}

// A response refused as another agent's leaves the outbox: it would be
// refused again however often it were sent. One refused by any other 403
// stays, to be sent again.
func TestOutboxDropsOnlyAResponseRefusedAsAnotherAgents(t *testing.T) {
	for code, dropped := range map[string]bool{api.CodeNotHolder: true, "forbidden": false} {
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
		srv, _ := forbidding(t, code)
		_, err = remote.New("origin", srv.URL, "tok").Respond(context.Background(), it.Turn, it.Response)
		if done := o.settle(it, err); done != dropped {
			t.Fatalf("403 %s (%v): settled %v, want %v", code, err, done, dropped)
		}
		left, err := st.Outbox()
		if err != nil || (len(left) == 0) != dropped {
			t.Fatalf("outbox after a 403 %s: %+v, %v (want it dropped: %v)", code, left, err, dropped)
		}
	}
}
