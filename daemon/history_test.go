package daemon

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// countingTransport counts the requests a client sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// histAgents serves a real Khala with a workflow of two parallel turns
// per round (steps 1-2, 3-4, 5-6) and enrolls two agents.
func histAgents(t *testing.T) (a, b *remote.Client, thread string) {
	t.Helper()
	ctx := context.Background()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	kdb := filepath.Join(t.TempDir(), "khala.db")
	runKhala(t, addr, kdb)
	tok, _, err := khala.IssueToken(ctx, kdb, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	enroll := func(name string) *remote.Client {
		cl := remote.New("origin", "http://"+addr, "")
		agentTok, err := cl.Enroll(ctx, tok.Token, name)
		if err != nil {
			t.Fatal(err)
		}
		cl.Token = agentTok
		return cl
	}
	a, b = enroll("a"), enroll("b")
	src := `workflow: pairs
binding: cloud
moderator: '$count(messages) >= 6 ? {"done": true} : [{"role": "w"}, {"role": "w"}]'
roles:
  w: {prompt: p}
`
	if _, err := a.PutWorkflow(ctx, "pairs", []byte(src)); err != nil {
		t.Fatal(err)
	}
	if thread, err = a.StartThread(ctx, "pairs", nil, ""); err != nil {
		t.Fatal(err)
	}
	return a, b, thread
}

// claimStep claims the queued turn of the given step (both of a pair are
// queued: the other is released again).
func claimStep(t *testing.T, cl *remote.Client, step int) api.Turn {
	t.Helper()
	ctx := context.Background()
	got, err := cl.Claim(ctx, api.ClaimRequest{Max: 2}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var want *api.Turn
	for i := range got {
		if got[i].Step == step {
			want = &got[i]
		} else if err := cl.Release(ctx, got[i].Turn, got[i].Claim); err != nil {
			t.Fatal(err)
		}
	}
	if want == nil {
		t.Fatalf("step %d not among the claimed %+v", step, got)
	}
	return *want
}

func steps(msgs []workflow.Message) []int {
	var out []int
	for _, m := range msgs {
		out = append(out, m.Step)
	}
	return out
}

// The history of a remote thread is fetched only when a step before the
// turn's is missing; an answer this daemon made is added from the
// server's acknowledgement; a sibling answered elsewhere just before one
// of ours is still fetched.
func TestHistoriesFetchOnlyWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	a, b, thread := histAgents(t)
	counter := &countingTransport{}
	a.HTTP = &http.Client{Transport: counter}
	h := newHistories(nil)
	const key = "origin--pairs--thread"
	names := map[*remote.Client]string{a: "a", b: "b"}
	answer := func(cl *remote.Client, tk api.Turn, add bool) {
		t.Helper()
		resp := api.Response{Claim: tk.Claim, Content: "answer " + tk.Turn}
		ans, err := cl.Respond(ctx, tk.Turn, resp)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := ans.Message(tk, resp)
		if !ok || m.Agent != names[cl] || m.Step != tk.Step || m.Content != resp.Content {
			t.Fatalf("acknowledgement without the message: %+v", ans)
		}
		if add {
			h.add(key, m)
		}
	}
	get := func(step int, wantFetch bool, want ...int) {
		t.Helper()
		before := counter.n.Load()
		msgs, err := h.get(ctx, a, key, thread, step)
		if err != nil {
			t.Fatal(err)
		}
		if fetched := counter.n.Load() > before; fetched != wantFetch {
			t.Errorf("step %d: fetched %v, want %v", step, fetched, wantFetch)
		}
		if got := steps(msgs); !slices.Equal(got, want) {
			t.Errorf("step %d: history has steps %v, want %v", step, got, want)
		}
	}

	// Round one: b answers step 2, then a answers step 1.
	get(1, false)
	answer(b, claimStep(t, b, 2), false)
	answer(a, claimStep(t, a, 1), true)
	// Step 3 needs step 2, which a did not make: fetched.
	get(3, true, 1, 2)
	// Round two: b answers step 4 first, a answers step 3 after it.
	answer(b, claimStep(t, b, 4), false)
	answer(a, claimStep(t, a, 3), true)
	// Step 5 needs step 4: fetched, though a's own step 3 is newer.
	get(5, true, 1, 2, 3, 4)
	// a answers step 5; step 6 needs only 1-5: nothing to fetch.
	answer(a, claimStep(t, a, 5), true)
	get(6, false, 1, 2, 3, 4, 5)
}
