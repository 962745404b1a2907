package remote

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
)

// Start sends a thread's workspace; StartThread sends none, as before.
func TestStartSendsWorkspace(t *testing.T) {
	var bodies []map[string]json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Errorf("body: %v", err)
		}
		bodies = append(bodies, b)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"thread": "thread-7", "status": "running"}`))
	}))
	defer srv.Close()
	c := New("origin", srv.URL, "tok")
	base := strings.Repeat("ab", 20)
	id, err := c.Start(context.Background(), "code-review", api.StartThread{Input: map[string]any{"change": "x"},
		Workspace: &api.StartWorkspace{Repo: "git@host:app.git", Base: base, Branch: "review/x"}})
	if err != nil || id != "thread-7" {
		t.Fatalf("start: %s %v", id, err)
	}
	if got := string(bodies[0]["workspace"]); got != `{"repo":"git@host:app.git","base":"`+base+`","branch":"review/x"}` {
		t.Fatalf("workspace sent: %s", got)
	}
	if _, err := c.StartThread(context.Background(), "code-review", nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, has := bodies[1]["workspace"]; has {
		t.Fatalf("StartThread sent a workspace: %v", bodies[1])
	}
}
