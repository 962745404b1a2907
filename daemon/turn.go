package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/workflow"
)

// toolErrorThreshold raises an "errors" detection when a turn's CLI
// reports this many tool errors.
const toolErrorThreshold = 5

// runTurn runs one turn of a local thread through its role's adapter. It
// is the engine's TurnFunc: failures come back as a message with Error.
func (r *runner) runTurn(ctx context.Context, t *workflow.Thread, d *workflow.Definition, turn workflow.Turn, history []workflow.Message) workflow.Message {
	if r.isDraining() {
		// Shutting down: start nothing new. The turn stays pending and
		// runs when the daemon starts again.
		<-ctx.Done()
		return workflow.Message{}
	}
	cfg := r.d.config()
	role := d.Roles[turn.Role]
	msg := workflow.Message{Agent: cfg.Agent.Name, Adapter: role.Adapter}
	fail := func(kind, format string, a ...any) workflow.Message {
		msg.Error = &workflow.MessageError{Kind: kind, Message: fmt.Sprintf(format, a...)}
		return msg
	}
	ac, ok := cfg.AdapterConfig(role.Adapter)
	if !ok {
		return fail("adapter", "unknown adapter %q", role.Adapter)
	}
	if ac.Type == "exec" && len(ac.Command) > 0 && ac.Command[0] == "nerve" && r.d.opts.Executable != "" {
		ac.Command = append([]string{r.d.opts.Executable}, ac.Command[1:]...)
	}
	ad, err := adapter.New(role.Adapter, ac)
	if err != nil {
		return fail("adapter", "%v", err)
	}
	ref := workflow.Ref{Workflow: t.Workflow, Thread: t.ID}.String()
	snap, err := r.snaps.update(t.ID, history)
	if err != nil {
		return fail("adapter", "write thread snapshot: %v", err)
	}
	workdir := t.Workdir
	if workdir == "" {
		workdir = r.d.paths.Home
	}
	req := adapter.Request{
		Prompt:  workflow.Prompt(d, ref, turn, history),
		Workdir: workdir,
		Env: []string{
			"NERVE_THREAD=" + ref,
			"NERVE_ROLE=" + turn.Role,
			"NERVE_STEP=" + strconv.Itoa(turn.Step),
			"NERVE_WORKDIR=" + workdir,
			"NERVE_THREAD_SNAPSHOT=" + snap,
			"NERVE_HOME=" + r.d.paths.Home,
			"PATH=" + r.pathWithNerve(),
		},
	}
	var lastOutput atomic.Int64
	lastOutput.Store(time.Now().UnixNano())
	req.OnOutput = func([]byte) { lastOutput.Store(time.Now().UnixNano()) }
	req.OnStart = func(pid int) { r.recordProc(t.ID, turn.Step, pid) }
	defer r.forgetProc(t.ID, turn.Step)

	active := ActiveTurn{Thread: t.ID, Step: turn.Step, Role: turn.Role, Adapter: role.Adapter, StartedAt: time.Now().UTC()}
	r.setActive(active, true)
	defer r.setActive(active, false)
	stopWatch := r.watchStall(t.ID, turn, role.Adapter, &lastOutput)
	res, err := ad.Run(ctx, req)
	stopWatch()
	if ctx.Err() != nil {
		return workflow.Message{}
	}
	if err != nil {
		var ae *adapter.Error
		if errors.As(err, &ae) && ae.Usage != nil {
			msg.Usage = ae.Usage // tokens spent on a failed turn still count
		}
		if errors.Is(err, adapter.ErrTimeout) {
			return fail("timeout", "%v", err)
		}
		return fail("adapter", "%v", err)
	}
	msg.Content, msg.Usage = res.Content, &res.Usage
	if res.Usage.ToolErrors >= toolErrorThreshold {
		r.detect(t.ID, turn, role.Adapter, "errors", fmt.Sprintf("%d tool errors reported by %s", res.Usage.ToolErrors, role.Adapter))
	}
	x := &workflow.Extractor{Endpoint: repairEndpoint(cfg.Extract)}
	meta, err := x.Extract(ctx, role, res.Content)
	if err != nil {
		r.detect(t.ID, turn, role.Adapter, "malformed", err.Error())
		msg.Error = &workflow.MessageError{Kind: "extract", Message: err.Error()}
	}
	msg.Meta = meta
	return msg
}

// watchStall raises one "stall" detection when the adapter prints nothing
// for longer than the configured threshold.
func (r *runner) watchStall(thread string, turn workflow.Turn, adapterName string, last *atomic.Int64) (stop func()) {
	after := r.d.config().Daemon.StallAfter.D()
	if after <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(max(after/4, 10*time.Millisecond))
		defer tick.Stop()
		raised := false
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				quiet := time.Since(time.Unix(0, last.Load()))
				if quiet >= after && !raised {
					raised = true
					r.detect(thread, turn, adapterName, "stall", fmt.Sprintf("no output for %s", quiet.Round(time.Second)))
				} else if quiet < after {
					raised = false
				}
			}
		}
	}()
	return func() { close(done) }
}

func (r *runner) detect(thread string, turn workflow.Turn, adapterName, kind, msg string) {
	err := r.d.store.AppendEvents(thread, workflow.Event{Type: workflow.EventDetection, At: time.Now().UTC(),
		Step: turn.Step, Role: turn.Role, Adapter: adapterName, Status: kind, Message: msg})
	if err != nil {
		r.d.log.Warn("record detection", "thread", thread, "err", err)
	}
}

// pathWithNerve puts the running binary's directory first on PATH so an
// agent's `nerve thread messages` is this nerve.
func (r *runner) pathWithNerve() string {
	path := os.Getenv("PATH")
	if r.d.opts.Executable == "" {
		return path
	}
	dir := filepath.Dir(r.d.opts.Executable)
	if strings.HasPrefix(path, dir+string(os.PathListSeparator)) {
		return path
	}
	return dir + string(os.PathListSeparator) + path
}

// repairEndpoint is nerve.yaml's extract section as the extractor takes
// it; nil when unset.
func repairEndpoint(e *config.Endpoint) *workflow.Endpoint {
	if e == nil {
		return nil
	}
	return &workflow.Endpoint{BaseURL: e.BaseURL, Model: e.Model, APIKeyEnv: e.APIKeyEnv, Timeout: e.Timeout.D()}
}
