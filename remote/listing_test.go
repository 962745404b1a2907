package remote

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// ListAll keeps the names' order, lists a reachable remote's workflows and
// says why another could not be read, within the bound even when one hangs.
func TestListAll(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[{"name":"review","binding":"cloud"}]`))
	}))
	defer ok.Close()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	open := func(name string) (*Client, error) {
		switch name {
		case "ok":
			return New(name, ok.URL, "tok"), nil
		case "slow":
			return New(name, slow.URL, "tok"), nil
		}
		return nil, errors.New("remote " + name + ": no token")
	}
	start := time.Now()
	got := ListAll(context.Background(), []string{"ok", "slow", "gone"}, 300*time.Millisecond, open)
	if time.Since(start) > 5*time.Second {
		t.Fatalf("ListAll took %s with a bound of 300ms", time.Since(start))
	}
	if len(got) != 3 || got[0].Remote != "ok" || got[1].Remote != "slow" || got[2].Remote != "gone" {
		t.Fatalf("order: %+v", got)
	}
	if got[0].Unreachable != "" || len(got[0].Workflows) != 1 || got[0].Workflows[0].Name != "review" {
		t.Fatalf("reachable remote: %+v", got[0])
	}
	if !strings.HasPrefix(got[1].Unreachable, "unreachable: ") || got[2].Unreachable != "unreachable: no token" {
		t.Fatalf("unreachable remotes: %q, %q", got[1].Unreachable, got[2].Unreachable)
	}
}
