package daemon

import (
	"context"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/config/validation"
)

// watchConfig hot-reloads nerve.yaml: load and validate, then swap. An
// invalid file changes nothing; the error is logged and shown by `daemon
// status`. Running turns keep the adapter they started with, because each
// turn resolved its adapter when it began. It starts watching now (before
// the daemon answers its first request, so no change made after that is
// missed) and returns the loop that reloads it.
func (d *Daemon) watchConfig() func(ctx context.Context) {
	file := d.paths.Config()
	if cfg := d.config(); cfg.File != "" {
		file = cfg.File
	}
	d.cfgWatch = config.NewWatcher(file)
	return func(ctx context.Context) { d.cfgWatch.Run(ctx, d.reload) }
}

// freshConfig reloads nerve.yaml before a request is answered when its
// content changed since the daemon last read it: a command run right
// after an edit acts on the edit, not on the config the watcher has not
// replaced yet.
func (d *Daemon) freshConfig() {
	if d.cfgWatch != nil {
		d.cfgWatch.Check(d.reload)
	}
}

func (d *Daemon) reload() {
	cfg, err := d.opts.Load()
	if err == nil {
		// nerve.yaml's problems refuse it, as `nerve validate` reports them;
		// a broken workflow file is the workflow's problem, not the
		// config's, and is only reported.
		rep := validation.Check(cfg)
		if len(rep.Config) > 0 {
			err = rep.Config
		}
		for _, w := range rep.Workflows {
			for _, p := range w.Problems {
				d.log.Warn("workflow has a problem; nerve validate shows all", "workflow", w.Name, "err", p)
			}
		}
	}
	d.mu.Lock()
	if err != nil {
		d.cfgState.LastReload = err.Error()
		d.mu.Unlock()
		d.log.Error("nerve.yaml not reloaded; keeping the previous config", "err", err)
		return
	}
	d.cfg = cfg
	d.cfgState = ConfigState{File: cfg.File, LoadedAt: time.Now().UTC(), LastReload: "ok"}
	old := d.senses
	d.mu.Unlock()
	d.log.Info("nerve.yaml reloaded", "file", cfg.File)

	// The senses are restarted outside the lock: a sense delivering a
	// signal reads the config.
	d.capacity.SetMax(cfg.Agent.MaxConcurrentTurns)
	d.gate.Changed() // a cap may have been raised: held turns look again
	if cfg.Daemon.MetricsAddr != d.opts.Config.Daemon.MetricsAddr {
		d.log.Warn("daemon.metrics_addr changed; it takes effect when the daemon restarts", "metrics_addr", cfg.Daemon.MetricsAddr)
	}
	if old != nil {
		old.stop()
	}
	if d.runner.isDraining() {
		return
	}
	set := d.startSenses(cfg)
	d.mu.Lock()
	d.senses = set
	d.mu.Unlock()
}
