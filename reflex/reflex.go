package reflex

import (
	"log/slog"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala/api"
)

// Actions are what a reflex can make the daemon do.
type Actions interface {
	// RunTurn runs a claimed remote turn with adapter and calls done when
	// it is over (answered, lost or released).
	RunTurn(remoteName string, t api.Turn, adapter string, done func())
	// ReleaseTurn gives a claimed turn back at once: no reflex runs it.
	ReleaseTurn(remoteName string, t api.Turn, done func())
	// StartWorkflow starts a local thread.
	StartWorkflow(name string, input map[string]any) error
}

// Set is the reflexes of one nerve.yaml.
type Set struct {
	rules  []config.Reflex
	senses map[string]config.Sense
	act    Actions
	log    *slog.Logger
}

// New returns the reflexes of cfg acting through act.
func New(cfg *config.Config, act Actions, logger *slog.Logger) *Set {
	s := &Set{rules: cfg.Reflexes, senses: map[string]config.Sense{}, act: act, log: logger}
	for _, sn := range cfg.Senses {
		s.senses[sn.Name] = sn
	}
	return s
}

// Handle acts on one signal. A claimed turn goes to the first do: turn
// rule of its sense, or back to the queue when there is none; every other
// signal starts the workflows of its sense's do: workflow rules.
func (s *Set) Handle(sig Signal) {
	if sig.Turn.Turn != "" {
		remoteName := s.senses[sig.Sense].Remote
		for _, r := range s.rules {
			if r.On == sig.Sense && r.Do == "turn" {
				s.act.RunTurn(remoteName, sig.Turn, r.Adapter, sig.Done)
				return
			}
		}
		s.log.Warn("no do: turn reflex for a claimed turn; releasing it", "sense", sig.Sense, "turn", sig.Turn.Turn)
		s.act.ReleaseTurn(remoteName, sig.Turn, sig.Done)
		return
	}
	for _, r := range s.rules {
		if r.On != sig.Sense || r.Do != "workflow" {
			continue
		}
		if err := s.act.StartWorkflow(r.Workflow, r.Input); err != nil {
			s.log.Error("reflex could not start workflow", "sense", sig.Sense, "workflow", r.Workflow, "err", err)
		} else {
			s.log.Info("reflex started workflow", "sense", sig.Sense, "workflow", r.Workflow, "path", sig.Path)
		}
	}
	if sig.Done != nil {
		sig.Done()
	}
}

// WantsTurns reports whether sense has a do: turn reflex: a khala sense
// without one would claim turns only to give them back.
func (s *Set) WantsTurns(senseName string) bool { return s.TurnAdapter(senseName) != "" }

// TurnAdapter is the adapter that runs the turns sense claims (its first
// do: turn reflex's), "" when none does: the khala sense claims nothing
// while the gate holds that adapter back.
func (s *Set) TurnAdapter(senseName string) string {
	for _, r := range s.rules {
		if r.On == senseName && r.Do == "turn" {
			return r.Adapter
		}
	}
	return ""
}

// Signal is something a sense noticed.
type Signal struct {
	Sense string
	At    time.Time
	// Path is the file that changed (file sense).
	Path string
	// Turn is a claimed remote turn (khala sense); its reflex must run
	// it, or release it when it cannot.
	Turn api.Turn
	// Done, when set, must be called once the signal's work is over: it
	// frees the capacity slot a claimed turn holds.
	Done func()
}
