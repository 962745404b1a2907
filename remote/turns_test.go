package remote

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
)

// TurnEvents posts a turn's detections under its claim; the server's 409
// is a lost claim.
func TestTurnEvents(t *testing.T) {
	var got api.TurnEvents
	var path string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.Method + " " + r.URL.EscapedPath()
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("body: %v", err)
		}
		w.WriteHeader(status)
		if status == http.StatusConflict {
			w.Write([]byte(`{"error": {"code": "claim_lost", "message": "drop the result"}}`))
			return
		}
		w.Write([]byte(`{"turn": "thread-1.2", "events": 1}`))
	}))
	defer srv.Close()
	c := New("origin", srv.URL, "tok")
	stall := api.TurnEvent{Type: "detection", Status: "stall", Message: "no output for 1m0s", Adapter: "claude"}
	if err := c.TurnEvents(context.Background(), "thread-1/2", "c1", stall); err != nil {
		t.Fatal(err)
	}
	if path != "POST /v1/turns/thread-1%2F2/events" || got.Claim != "c1" || len(got.Events) != 1 || got.Events[0] != stall {
		t.Fatalf("sent %s %+v", path, got)
	}
	status = http.StatusConflict
	if err := c.TurnEvents(context.Background(), "thread-1.2", "c1", stall); !IsClaimLost(err) {
		t.Fatalf("409: %v", err)
	}
}
