package daemon

import (
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/reflex"
)

// SandboxStatusOf is daemon.sandbox as it resolves on this machine.
func SandboxStatusOf(cfg *config.Config) SandboxStatus {
	mode := cfg.Daemon.Sandbox
	if mode == "" {
		mode = sandbox.ModeAuto
	}
	eff, err := sandbox.Effective(mode)
	st := SandboxStatus{Mode: mode, Effective: eff, Network: cfg.SandboxNetwork()}
	if err != nil {
		w := SandboxWarning(mode, err)
		st.Warning = &w
	}
	return st
}

// SandboxWarning is what `nerve daemon status` and `nerve init` say when
// mode does not give turns a sandbox here.
func SandboxWarning(mode string, err error) string {
	if mode == sandbox.ModeBwrap {
		return err.Error() + ": turns fail (daemon.sandbox: bwrap)"
	}
	return err.Error() + ": turns run without a sandbox, as you, with all you can read"
}

// turnServices are what every turn's sandbox gets from the daemon (see
// reflex.TurnService), besides what the executor itself puts there.
func turnServices(d *Daemon, r *runner) []reflex.TurnService {
	var out []reflex.TurnService
	out = append(out, newTurnSockets(d).service) // each turn's channel to nerve, with its rights only
	out = append(out, d.netService)              // the allow-list proxy, secrets
	return out
}
