package daemon

import (
	"context"
	"fmt"
	"sync"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/sense"
	"github.com/nerve-agents/nerve/workflow"
)

// senseSet is the senses of one nerve.yaml, running.
type senseSet struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	senses []sense.Sense
	idle   map[string]string // configured but not started, and why
}

// startSenses starts the senses of cfg with its reflexes. Claimed turns
// run on the runner's context, so stopping senses never stops a turn.
func (d *Daemon) startSenses(cfg *config.Config) *senseSet {
	ctx, cancel := context.WithCancel(context.Background())
	set := &senseSet{cancel: cancel, idle: map[string]string{}}
	reflexes := reflex.New(cfg, d.runner, d.log)
	for _, sc := range cfg.Senses {
		var s sense.Sense
		switch sc.Kind {
		case "interval":
			s = sense.NewInterval(sc.Name, sc.Every.D())
		case "file":
			s = sense.NewFile(sc.Name, sc.Paths)
		case "khala":
			if !reflexes.WantsTurns(sc.Name) {
				set.idle[sc.Name] = "not started: no do: turn reflex runs its turns"
				continue
			}
			cl, err := remote.ForConfig(cfg, sc.Remote)
			if err != nil {
				set.idle[sc.Name] = "not started: " + err.Error()
				continue
			}
			if cl.Token == "" {
				set.idle[sc.Name] = fmt.Sprintf("not started: no token for %s (nerve init --remote %s=URL --enroll-token T)", sc.Remote, sc.Remote)
				continue
			}
			k := sense.NewKhala(sc.Name, cl, d.capacity, sc.Workflows, sc.Roles, d.log)
			k.Adapter, k.Gate = reflexes.TurnAdapter(sc.Name), d.gate
			k.Repos = func() *api.RepoFilter { return d.claimRepos(sc.Remote) }
			s = k
		}
		set.senses = append(set.senses, s)
		set.wg.Add(1)
		go func() {
			defer set.wg.Done()
			if err := s.Run(ctx, reflexes.Handle); err != nil {
				d.log.Error("sense stopped", "sense", s.Name(), "err", err)
			}
		}()
	}
	for name, why := range set.idle {
		d.log.Warn("sense idle", "sense", name, "why", why)
	}
	return set
}

// stop ends every sense and waits for them.
func (s *senseSet) stop() {
	s.cancel()
	s.wg.Wait()
}

func (s *senseSet) states(cfg *config.Config) []SenseState {
	out := []SenseState{}
	kinds := map[string]string{}
	for _, sc := range cfg.Senses {
		kinds[sc.Name] = sc.Kind
	}
	for _, sn := range s.senses {
		out = append(out, SenseState{Name: sn.Name(), Kind: sn.Kind(), State: sn.State()})
	}
	for name, why := range s.idle {
		out = append(out, SenseState{Name: name, Kind: kinds[name], State: why})
	}
	return out
}

// StartWorkflow starts a local thread for a do: workflow reflex.
func (r *runner) StartWorkflow(name string, input map[string]any) error {
	cfg := r.d.config()
	def, err := workflow.Find(cfg.Workflows, name)
	if err != nil {
		return err
	}
	if err := checkRunnable(def, cfg); err != nil {
		return err
	}
	in, err := def.CheckInputs(input)
	if err != nil {
		return err
	}
	// A reflex's thread has no directory of its own: a workspace must name
	// an absolute repo (a relative one fails here; resolving it against
	// NERVE_HOME would find whatever repository holds NERVE_HOME).
	ws, err := workspaceRequest(def, StartRequest{})
	if err != nil {
		return err
	}
	// No workdir: its turns work in the thread's scratch directory, never
	// in NERVE_HOME, where an agent could rewrite nerve.yaml.
	_, err = r.start(r.ctx, def, threadSpec{Input: in, Workspace: ws})
	return err
}

// reconcile gives back the claims a crashed daemon held: their adapters
// were killed (killStaleProcs), so each turn is released for another
// agent, or dropped if the remote no longer grants it.
func (r *runner) reconcile() {
	for _, c := range r.claims() {
		r.d.log.Info("releasing a turn held before a restart", "remote", c.Remote, "turn", c.Turn.Turn)
		r.release(c.Remote, c.Turn)
	}
}
