package reflex

import (
	"context"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
)

// A turn's workdir is the one its thread was started in, else a scratch
// directory (its thread's, or its own), and never NERVE_HOME: an agent may
// write under its workdir, and NERVE_HOME holds nerve.yaml and the tokens.
func TestTurnWorkdir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		turn    Turn
		scratch bool
		want    string // the adapter's workdir, or the turn's error
	}{
		{"the thread's workdir", Turn{Workdir: "/src/project"}, true, "/src/project"},
		{"the thread's scratch", Turn{}, true, "/scratch/thread-3"},
		{"a turn's own scratch", Turn{OwnScratch: true}, true, "/scratch/thread-3/2"},
		{"no scratch", Turn{}, false, "the turn has no workdir and this daemon no scratch directories"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults(t.TempDir())
			cfg.Adapters["fake"] = config.Adapter{Type: "exec", Command: []string{"true"}}
			rec := newRecorder()
			deps := Deps{Config: func() *config.Config { return cfg }, Home: "/home/n", Snapshots: rec, Procs: rec, Tracker: rec,
				NewAdapter: func(string, config.Adapter) (adapter.Adapter, error) {
					return &fakeAdapter{run: func(_ context.Context, req adapter.Request) (*adapter.Result, error) {
						return &adapter.Result{Content: req.Workdir}, nil
					}}, nil
				}}
			if tc.scratch {
				deps.Scratch = rec
			}
			turn := tc.turn
			turn.Thread, turn.Key, turn.Step, turn.Adapter = "thread-3", "thread-3", 2, "fake"
			a, ok := NewExecutor(deps).Run(context.Background(), &turn)
			got := a.Content
			if a.Error != nil {
				got = a.Error.Message
				if a.Error.Kind != KindAdapter {
					t.Errorf("kind %q", a.Error.Kind)
				}
			}
			if !ok || got != tc.want || strings.HasPrefix(got, "/home/n") {
				t.Errorf("workdir %q (ok %v), want %q", got, ok, tc.want)
			}
		})
	}
}
