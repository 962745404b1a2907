package khala

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/workflow"
)

// hookReceiver is a local webhook endpoint that fails its first failFirst
// deliveries with 500.
type hookReceiver struct {
	URL       string
	got       chan khaladb.WebhookPayload
	calls     atomic.Int64
	mu        sync.Mutex
	delivered map[string]int // X-Khala-Delivery -> calls
}

func newHookReceiver(t *testing.T, failFirst int64) *hookReceiver {
	h := &hookReceiver{got: make(chan khaladb.WebhookPayload, 100), delivered: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.calls.Add(1)
		h.mu.Lock()
		h.delivered[r.Header.Get("X-Khala-Delivery")]++
		h.mu.Unlock()
		if n <= failFirst {
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		var p khaladb.WebhookPayload
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &p); err != nil || r.Header.Get("X-Khala-Event") != p.Event {
			http.Error(w, "bad payload", http.StatusBadRequest)
			return
		}
		h.got <- p
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL + "/hook?secret=s3"
	return h
}

func (h *hookReceiver) next(t *testing.T) khaladb.WebhookPayload {
	t.Helper()
	select {
	case p := <-h.got:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook within 5s")
		return khaladb.WebhookPayload{}
	}
}

func fastBackoff(o *Options) {
	o.WebhookBackoff = func(int) time.Duration { return 20 * time.Millisecond }
}

func TestWebhookRetriesWithBackoff(t *testing.T) { eachBackend(t, testWebhookRetriesWithBackoff) }

func testWebhookRetriesWithBackoff(t *testing.T, bk backend) {
	ts := bk.server(t, fastBackoff)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	hook := newHookReceiver(t, 2)
	id := a.start("pair", map[string]any{"turns": 1}, hook.URL)
	tk := a.claimOne()
	a.respond(tk, "all done", nil)
	p := hook.next(t)
	if p.Event != workflow.EventThreadEnded || p.Thread != id || p.Workflow != "pair" || p.Status != workflow.StatusCompleted {
		t.Fatalf("payload: %+v", p)
	}
	if res, _ := p.Result.(map[string]any); res["last"] != "all done" {
		t.Fatalf("result: %#v", p.Result)
	}
	if n := hook.calls.Load(); n != 3 {
		t.Fatalf("want 3 calls (2 failures, 1 success), got %d", n)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.delivered) != 1 {
		t.Fatalf("retries must carry the same delivery id: %v", hook.delivered)
	}
}

func TestWebhookGivesUp(t *testing.T) { eachBackend(t, testWebhookGivesUp) }

func testWebhookGivesUp(t *testing.T, bk backend) {
	ts := bk.server(t, fastBackoff, func(o *Options) { o.WebhookAttempts = 3 })
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	hook := newHookReceiver(t, 1000)
	a.start("pair", map[string]any{"turns": 0}, hook.URL) // ends at once
	waitFor(t, "three attempts", func() bool { return hook.calls.Load() >= 3 })
	waitFor(t, "the outbox to empty", func() bool { return ts.srv.metrics.webhooksDropped.Load() == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := hook.calls.Load(); n != 3 {
		t.Fatalf("want exactly 3 attempts, got %d", n)
	}
}

// A receiver that hangs delays only its own notification: threads go on.
func TestWebhookNeverBlocksQueue(t *testing.T) { eachBackend(t, testWebhookNeverBlocksQueue) }

func testWebhookNeverBlocksQueue(t *testing.T, bk backend) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	ts := bk.server(t, func(o *Options) { o.WebhookTimeout = 30 * time.Second })
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	start := time.Now()
	for range 20 {
		id := a.start("pair", map[string]any{"turns": 1}, slow.URL)
		tk := a.claimOne()
		if s, _ := a.respond(tk, "x", nil); s != 200 {
			t.Fatal("respond")
		}
		if a.thread(id).Status != workflow.StatusCompleted {
			t.Fatal("not completed")
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("20 threads with a hanging webhook took %s", d)
	}
}
