package reflex

import (
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala/api"
)

// actions records what the reflexes made the daemon do.
type actions struct{ did []string }

func (a *actions) RunTurn(remoteName string, t api.Turn, adapter string, done func()) {
	a.did = append(a.did, "run "+remoteName+" "+t.Turn+" with "+adapter)
	done()
}

func (a *actions) ReleaseTurn(remoteName string, t api.Turn, done func()) {
	a.did = append(a.did, "release "+remoteName+" "+t.Turn)
	done()
}

func (a *actions) StartWorkflow(name string, _ map[string]any) error {
	a.did = append(a.did, "start "+name)
	if name == "broken" {
		return errors.New("no such workflow")
	}
	return nil
}

func TestHandle(t *testing.T) {
	cfg := &config.Config{
		Senses: []config.Sense{
			{Name: "queue", Kind: "khala", Remote: "origin"},
			{Name: "idle-queue", Kind: "khala", Remote: "backup"},
			{Name: "nightly", Kind: "interval"},
		},
		Reflexes: []config.Reflex{
			{On: "queue", Do: "turn", Adapter: "claude"},
			{On: "queue", Do: "turn", Adapter: "codex"}, // the first rule wins
			{On: "nightly", Do: "workflow", Workflow: "report"},
			{On: "nightly", Do: "workflow", Workflow: "broken"},
		},
	}
	cases := []struct {
		name string
		sig  Signal
		want []string
	}{
		{"a claimed turn runs with its sense's first turn rule", Signal{Sense: "queue", Turn: api.Turn{Turn: "t1"}},
			[]string{"run origin t1 with claude"}},
		{"a claimed turn no rule runs is released", Signal{Sense: "idle-queue", Turn: api.Turn{Turn: "t2"}},
			[]string{"release backup t2"}},
		{"a tick starts every workflow of its sense, failing or not", Signal{Sense: "nightly"},
			[]string{"start report", "start broken"}},
		{"a signal no rule is on does nothing", Signal{Sense: "unknown"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			act := &actions{}
			done := 0
			c.sig.Done = func() { done++ }
			New(cfg, act, slog.New(slog.DiscardHandler)).Handle(c.sig)
			if !slices.Equal(act.did, c.want) {
				t.Fatalf("did %q, want %q", act.did, c.want)
			}
			if done != 1 {
				t.Fatalf("Done called %d times, want once", done)
			}
		})
	}
	s := New(cfg, &actions{}, slog.New(slog.DiscardHandler))
	for sense, want := range map[string]bool{"queue": true, "idle-queue": false, "nightly": false} {
		if got := s.WantsTurns(sense); got != want {
			t.Errorf("WantsTurns(%s) = %v, want %v", sense, got, want)
		}
	}
}
