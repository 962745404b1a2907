package khala

import (
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// boundsWF's moderator answers as the thread's input says: a result
// nested 20,000 deep, a 2 MiB result, an 8 KiB fail reason, or a turn.
const boundsWF = `workflow: bounds
binding: cloud
moderator: |
  input.kind = "deep" ? {"done": true, "result": $reduce([1..20000], function($acc, $i) { {"a": $acc} }, 1)}
  : input.kind = "big" ? {"done": true, "result": $join([1..262144].("xxxxxxxx"))}
  : input.kind = "fail" ? {"fail": $join([1..1024].("xxxxxxxx"))}
  : input.kind = "grow" ? {"done": true, "result": $length($reduce([1..28], function($s, $i) { $s & $s }, "x"))}
  : $count(messages) = 0 ? {"role": "worker", "instruction": "work"} : {"done": true}
inputs:
  kind: {type: string}
roles:
  worker: {prompt: You work.}
`

// A moderator cannot poison what everyone reads: what it returns past a
// bound fails its own thread, saying which bound, and the listing
// everyone reads still answers. A record that cannot be decoded, as one
// stored before the bounds could be, fails that thread's reads alone.
func TestModeratorCannotPoisonListing(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ts := bk.server(t)
		a := ts.agent("a")
		a.putWorkflow(boundsWF)
		for kind, want := range map[string]string{
			"deep": "nested deeper than 64 levels",
			"big":  "returned more than 1024 KiB",
			"fail": "fail reason of 8192 bytes, more than 4096",
			"grow": "used more than 64 MiB of memory",
		} {
			id := a.start("bounds", map[string]any{"kind": kind}, "")
			th := a.thread(id)
			if th.Status != workflow.StatusFailed || !strings.Contains(th.Error, want) || len(th.Error) > 1000 || th.Result != nil {
				t.Errorf("%s: thread %s, error %.200q: want failed saying %q", kind, th.Status, th.Error, want)
			}
		}
		ok := a.start("bounds", map[string]any{"kind": "turn"}, "")
		bad := a.start("bounds", map[string]any{"kind": "turn"}, "")
		// As a record stored before the bounds: a result too deep for
		// encoding/json to decode again.
		deep := any(1.0)
		for range 20000 {
			deep = map[string]any{"a": deep}
		}
		err := ts.store.UpdateThread(t.Context(), bad, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			c := &khaladb.ThreadChange{Thread: v.Thread}
			c.Thread.Result = deep
			return c, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var list []threadJSON
		a.must("GET", "/v1/threads", nil, 200, &list)
		seen := map[string]threadJSON{}
		for _, th := range list {
			seen[th.ID] = th
		}
		if len(list) != 6 || seen[ok].Status != workflow.StatusRunning {
			t.Fatalf("listing: %d threads, %s running: %+v", len(list), ok, seen[ok])
		}
		if th := seen[bad]; th.Status != workflow.StatusFailed || !strings.Contains(th.Error, "stored record cannot be read") {
			t.Fatalf("listing shows the unreadable thread as %s, %q", th.Status, th.Error)
		}
		a.must("GET", "/v1/threads?workflow=bounds&status=running", nil, 200, nil)
		if s, _ := a.do("GET", "/v1/threads/"+bad, nil); s != 500 {
			t.Fatalf("the unreadable thread itself: %d, want 500", s)
		}
		a.thread(ok)
	})
}
