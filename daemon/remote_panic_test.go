package daemon

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// remoteAgent serves a real Khala on loopback with the cloud workflow src
// stored under name, enrolls an agent and returns its client (the URL is
// cl.BaseURL) and the Khala's database.
func remoteAgent(t *testing.T, name, src string) (cl *remote.Client, kdb string) {
	t.Helper()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	kdb = filepath.Join(t.TempDir(), "khala.db")
	runKhala(t, addr, kdb)
	tok, _, err := khala.IssueToken(ctx, kdb, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl = remote.New("origin", "http://"+addr, "")
	if cl.Token, err = cl.Enroll(ctx, tok.Token, "agent-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutWorkflow(ctx, name, []byte(src)); err != nil {
		t.Fatal(err)
	}
	return cl, kdb
}

// claimOne claims the next queued turn.
func claimOne(t *testing.T, cl *remote.Client) api.Turn {
	t.Helper()
	got, err := cl.Claim(context.Background(), api.ClaimRequest{Max: 1}, 5*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %d turns", err, len(got))
	}
	return got[0]
}

// remoteDaemon is a daemon's runner, store, gate and outbox over a fresh
// NERVE_HOME, without its socket, enrolled in cl's remote as "origin"
// with an exec adapter "fragile" that answers "fine".
func remoteDaemon(t *testing.T, cl *remote.Client) *Daemon {
	t.Helper()
	home := t.TempDir()
	if err := remote.SaveToken(home, "origin", cl.Token); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults(home)
	cfg.Remotes["origin"] = config.Remote{URL: cl.BaseURL}
	cfg.Adapters["fragile"] = config.Adapter{Type: "exec", Command: []string{"sh", "-c", "echo fine"}}
	d, _ := newGatedDaemon(t, cfg)
	d.outbox = newOutbox(d)
	return d
}

// runClaimed runs a claimed turn as the khala sense hands it over, and
// waits until its slot is freed and the turn's goroutine is done.
func runClaimed(t *testing.T, d *Daemon, turn api.Turn, adapterName string) {
	t.Helper()
	freed := make(chan struct{})
	var once atomic.Bool
	d.runner.RunTurn("origin", turn, adapterName, func() {
		if once.CompareAndSwap(false, true) {
			close(freed)
		}
	})
	select {
	case <-freed:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not end")
	}
	d.runner.wait() // its answer delivered
}

// A panic while a remote turn runs fails that turn (an answer with an
// error of kind internal) and the daemon lives on: it runs the thread's
// next turn. Before, the panic ended the daemon and every turn it ran.
func TestRemoteTurnPanicFailsTheTurnNotTheDaemon(t *testing.T) {
	cl, _ := remoteAgent(t, "twice", `workflow: twice
binding: cloud
moderator: '$count(messages) < 2 ? {"role": "w", "instruction": "go"} : {"done": true, "result": messages.(error ? error.kind : content)}'
roles:
  w: {prompt: p}
`)
	ctx := context.Background()
	thread, err := cl.StartThread(ctx, "twice", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	d := remoteDaemon(t, cl)
	home := d.paths.Home
	var made atomic.Int32
	r := d.runner
	r.exec = reflex.NewExecutor(reflex.Deps{Config: d.config, Home: home, Snapshots: r.snaps, Procs: r, Tracker: r,
		Log: d.log, Scratch: r.scratch, Gate: d.gate,
		NewAdapter: func(name string, c config.Adapter) (adapter.Adapter, error) {
			if made.Add(1) == 1 {
				var m map[string]int
				m["nil map"]++ // a real bug's panic: assignment to entry in nil map
			}
			return adapter.New(name, c)
		}})

	runClaimed(t, d, claimOne(t, cl), "fragile")
	msgs, err := cl.Messages(ctx, thread, workflow.Filter{})
	if err != nil || len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Kind != "internal" ||
		!strings.Contains(msgs[0].Error.Message, "nil map") {
		t.Fatalf("the panicked turn's answer: %+v, %v", msgs, err)
	}

	runClaimed(t, d, claimOne(t, cl), "fragile")
	th, err := cl.Thread(ctx, thread)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(th.Result); th.Status != "completed" || got != "[internal fine]" {
		t.Fatalf("thread %s, result %s", th.Status, got)
	}
}
