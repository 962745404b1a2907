package reflex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/telemetry"
	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// Detection kinds (DESIGN.md, Watching agents).
const (
	DetectStall     = "stall"     // no output for daemon.stall_after
	DetectErrors    = "errors"    // the CLI reported ToolErrorThreshold tool errors or more
	DetectMalformed = "malformed" // the structured answer failed extraction
)

// ToolErrorThreshold raises an "errors" detection when a turn's CLI
// reports this many tool errors.
const ToolErrorThreshold = 5

// Error kinds of a turn's message.
const (
	KindAdapter = "adapter" // the adapter could not be made, started, or reported failure
	KindTimeout = "timeout" // the turn ran past its adapter's timeout
	KindExtract = "extract" // the structured output failed extraction
	// KindWorkspace: the turn's worktree could not be prepared or its work
	// published (fetch, push, no git); the branch did not move.
	KindWorkspace = workflow.ErrorKindWorkspace
)

// Turn is one turn to execute, of a local thread or a remote one: what the
// executor needs, and nothing of where the turn came from.
type Turn struct {
	// Thread names the turn's thread in the daemon's own records (active
	// turns, detections): a local thread's id, a remote thread's ref.
	Thread string
	// Ref is the thread's full ref, NERVE_THREAD for the agent.
	Ref string
	// Key names the turn's thread snapshot and its process record: unique
	// per thread on this machine.
	Key     string
	Step    int
	Role    string
	Adapter string
	Prompt  string
	// Workdir is NERVE_WORKDIR (a local thread's: where it was started).
	// Empty means the turn's scratch directory (Deps.Scratch), never
	// NERVE_HOME: an agent may write under its workdir, and nerve.yaml
	// and the tokens must stay out of its reach. A turn with a Workspace
	// works in its worktree instead.
	Workdir string
	// OwnScratch gives the turn a scratch directory of its own (by Step)
	// instead of its thread's: a remote turn's, removed when it ends.
	OwnScratch bool
	// Workspace, when set, is the thread's git workspace: the turn runs in
	// a worktree of it at its head and its work is committed and published
	// after the adapter answers (Key, Step and Parallel as the thread
	// needs them; Cloud for a remote thread).
	Workspace *workspace.Turn
	// History is the thread's messages so far, for the snapshot.
	History []workflow.Message
	// RoleDef returns the role's definition, for its meta schema; it is
	// called at most once, after the adapter has answered. Nil (or a nil
	// role): no structured output is taken.
	RoleDef func() *workflow.Role
	// Detected, when set, is told of each detection besides the
	// executor's sink: a remote turn sends it to its remote's trace.
	Detected func(workflow.Event)
}

// Answer is what a turn produced: the parts of a message that the turn
// itself decides.
type Answer struct {
	Content string
	Meta    any
	Usage   *usage.Usage
	Error   *workflow.MessageError
	// Commit and Changes are the turn's work, for a turn with a workspace
	// that answered: the commit it published (the start commit when it
	// changed nothing) and what it changed.
	Commit  string
	Changes *workflow.Changes
}

// Workspaces prepare a turn's git worktree; *workspace.Manager is one.
// The Tree they return publishes the turn's work (Tree.Finish).
type Workspaces interface {
	Open(ctx context.Context, t workspace.Turn) (*workspace.Tree, error)
}

// Snapshots write a thread's read-only snapshot for `nerve thread
// messages` inside a turn.
type Snapshots interface {
	// Update makes key's snapshot hold at least msgs and returns its path.
	Update(key string, msgs []workflow.Message) (string, error)
}

// Procs record running adapter process groups, so a daemon restarted
// after a crash can kill what the dead one left behind.
type Procs interface {
	RecordProc(key string, step, pid int)
	ForgetProc(key string, step int)
}

// Tracker follows the turns whose adapter is running (daemon status,
// graceful shutdown) and keeps their detections.
type Tracker interface {
	TurnStarted(t *Turn, at time.Time)
	TurnEnded(t *Turn)
	// Detected records a detection of a running turn.
	Detected(t *Turn, e workflow.Event)
}

// Deps are what the executor works with, passed in explicitly.
type Deps struct {
	// Config returns nerve.yaml as it is now: adapters, daemon.stall_after,
	// the extract endpoint. A turn reads it once, when it starts.
	Config func() *config.Config
	// Executable is the running nerve binary: its directory goes first on
	// an agent's PATH, and an exec adapter's "nerve" is it. Empty: neither.
	Executable string
	// Home is NERVE_HOME.
	Home      string
	Snapshots Snapshots
	Procs     Procs
	Tracker   Tracker
	Log       *slog.Logger
	// Workspaces prepare the worktrees of turns with a workspace; nil
	// fails such turns with kind workspace.
	Workspaces Workspaces
	// Scratch makes the directories of turns with no workdir; nil fails
	// such turns.
	Scratch Scratch
	// Gate holds turns back past an adapter's daily cap (they fail with
	// kind budget) and while it is paused after rate limits (they wait),
	// and is told how each turn ended; nil holds nothing back.
	Gate *Gate
	// TurnServices add to each turn's sandbox and end with the turn (the
	// network proxy, the per-turn socket); see TurnService.
	TurnServices []TurnService
	// NewAdapter makes an adapter instance; nil means adapter.New.
	NewAdapter func(name string, c config.Adapter) (adapter.Adapter, error)
}

// Executor runs turns: one for local and remote turns alike, so a fix or
// a detection lands on both at once. Its Run is safe for concurrent use.
type Executor struct {
	deps Deps
	path string // PATH for agents, the running binary first
}

// NewExecutor returns an executor working with deps.
func NewExecutor(deps Deps) *Executor {
	if deps.NewAdapter == nil {
		deps.NewAdapter = adapter.New
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	return &Executor{deps: deps, path: pathWithNerve(os.Getenv("PATH"), deps.Executable)}
}

// Run executes t: daily cap and back-off, snapshot, adapter with its
// environment, detections, usage, structured output. Failures come back
// in the answer's Error (kinds adapter, timeout, extract, budget); ok is
// false only when ctx ended the turn first, and then there is no answer.
// While the adapter is paused after rate limits the turn waits, before it
// counts as started.
func (x *Executor) Run(ctx context.Context, t *Turn) (a Answer, ok bool) {
	cfg := x.deps.Config()
	fail := func(kind string, err error) (Answer, bool) {
		a.Error = &workflow.MessageError{Kind: kind, Message: err.Error()}
		return a, true
	}
	ad, err := x.adapter(cfg, t.Adapter)
	if err != nil {
		return fail(KindAdapter, err)
	}
	if g := x.deps.Gate; g != nil {
		if err := g.Wait(ctx, t.Adapter); err != nil {
			if ctx.Err() != nil {
				return Answer{}, false
			}
			return fail(KindBudget, err)
		}
	}
	snap, err := x.deps.Snapshots.Update(t.Key, t.History)
	if err != nil {
		return fail(KindAdapter, fmt.Errorf("write thread snapshot: %w", err))
	}
	workdir := t.Workdir
	var tree *workspace.Tree
	switch {
	case t.Workspace != nil:
		if tree, err = x.open(ctx, t.Workspace); err != nil {
			if ctx.Err() != nil {
				return Answer{}, false
			}
			return fail(KindWorkspace, err)
		}
		workdir = tree.Dir
	case workdir == "":
		if workdir, err = x.scratch(t); err != nil {
			return fail(KindAdapter, err)
		}
	}
	env, box, endServices, err := x.enclose(ctx, cfg, t, workdir, snap, []string{
		"NERVE_THREAD=" + t.Ref,
		"NERVE_ROLE=" + t.Role,
		"NERVE_STEP=" + strconv.Itoa(t.Step),
		"NERVE_WORKDIR=" + workdir,
		"NERVE_THREAD_SNAPSHOT=" + snap,
		"NERVE_HOME=" + x.deps.Home,
		"PATH=" + x.path,
	})
	defer endServices()
	if err != nil {
		return fail(KindAdapter, err)
	}
	req := adapter.Request{
		Prompt:  t.Prompt,
		Workdir: workdir,
		Env:     env,
		Sandbox: box,
		OnStart: func(pid int) { x.deps.Procs.RecordProc(t.Key, t.Step, pid) },
	}
	if x.deps.Executable != "" {
		// nerve's MCP server for the turn: this very binary, given the
		// turn's variables (a CLI may not pass its environment on).
		req.MCP = &adapter.MCPServer{Command: x.deps.Executable, Args: []string{"mcp"}, Env: req.Env}
	}
	defer x.deps.Procs.ForgetProc(t.Key, t.Step)
	x.deps.Tracker.TurnStarted(t, time.Now().UTC())
	defer x.deps.Tracker.TurnEnded(t)
	if after := cfg.Daemon.StallAfter.D(); after > 0 {
		w := watchStall(after, func(quiet time.Duration) {
			x.detect(t, DetectStall, fmt.Sprintf("no output for %s", quiet.Round(time.Second)))
		})
		req.OnOutput = func([]byte) { w.output() }
		defer w.stop()
	}
	actx, endRun := telemetry.StartAdapter(ctx, t.Adapter)
	res, err := ad.Run(actx, req)
	res, err = maskOutput(cfg, res, err)
	endRun(err)
	if ctx.Err() != nil {
		return Answer{}, false
	}
	if x.deps.Gate != nil {
		x.deps.Gate.Ended(t.Adapter, err)
	}
	if err != nil {
		var ae *adapter.Error
		if errors.As(err, &ae) && ae.Usage != nil {
			a.Usage = ae.Usage // tokens spent on a failed turn still count
			usage.Priced(a.Usage, cfg.Pricing)
			x.checkToolErrors(t, ae.Usage)
		}
		if errors.Is(err, adapter.ErrTimeout) {
			return fail(KindTimeout, err)
		}
		return fail(KindAdapter, err)
	}
	a.Content, a.Usage = res.Content, &res.Usage
	usage.Priced(a.Usage, cfg.Pricing)
	x.checkToolErrors(t, &res.Usage)
	var role *workflow.Role
	if t.RoleDef != nil {
		role = t.RoleDef()
	}
	if role != nil {
		ex := &workflow.Extractor{Endpoint: RepairEndpoint(cfg.Extract)}
		meta, err := ex.Extract(ctx, role, res.Content)
		if err != nil {
			x.detect(t, DetectMalformed, err.Error())
			a.Error = &workflow.MessageError{Kind: KindExtract, Message: err.Error()}
		}
		a.Meta = meta
	}
	if tree != nil {
		// Only an answered turn publishes, and last, so little happens
		// between the publication and the answer's record (a crash there
		// is undone by the rerun's Open): one killed, timed out or
		// cancelled leaves the branch where it was, and the next Open
		// resets its worktree.
		r, err := tree.Finish(ctx, cfg.Agent.Name, workspace.Subject(t.Role, t.Step, res.Content))
		if ctx.Err() != nil {
			return Answer{}, false
		}
		if err != nil {
			// A workspace failure says more than an extraction's.
			a.Error = &workflow.MessageError{Kind: workspace.KindOf(err), Message: err.Error()}
		} else {
			a.Commit = r.Commit
			a.Changes = &workflow.Changes{Files: r.Changes.Files, Insertions: r.Changes.Insertions, Deletions: r.Changes.Deletions}
		}
	}
	return a, true
}

// adapter makes the turn's adapter from nerve.yaml as it is now. An exec
// adapter whose command is "nerve" runs this very binary, whatever PATH
// the daemon was started with.
func (x *Executor) adapter(cfg *config.Config, name string) (adapter.Adapter, error) {
	ac, ok := cfg.AdapterConfig(name)
	if !ok {
		return nil, fmt.Errorf("unknown adapter %q on agent %s", name, cfg.Agent.Name)
	}
	if ac.Type == "exec" && len(ac.Command) > 0 && ac.Command[0] == "nerve" && x.deps.Executable != "" {
		ac.Command = append([]string{x.deps.Executable}, ac.Command[1:]...)
	}
	return x.deps.NewAdapter(name, ac)
}

func (x *Executor) checkToolErrors(t *Turn, u *usage.Usage) {
	if u.ToolErrors >= ToolErrorThreshold {
		x.detect(t, DetectErrors, fmt.Sprintf("%d tool errors reported by %s", u.ToolErrors, t.Adapter))
	}
}

// detect hands a detection to the tracker and the turn's own hook.
func (x *Executor) detect(t *Turn, kind, msg string) {
	e := workflow.Event{Type: workflow.EventDetection, At: time.Now().UTC(), Step: t.Step, Role: t.Role,
		Adapter: t.Adapter, Status: kind, Message: msg}
	x.deps.Log.Info("detection", "thread", t.Thread, "step", t.Step, "kind", kind, "message", msg)
	x.deps.Tracker.Detected(t, e)
	if t.Detected != nil {
		t.Detected(e)
	}
}

// pathWithNerve puts the running binary's directory first on PATH so an
// agent's `nerve thread messages` is this nerve.
func pathWithNerve(path, executable string) string {
	if executable == "" {
		return path
	}
	dir := filepath.Dir(executable)
	if path == dir || strings.HasPrefix(path, dir+string(os.PathListSeparator)) {
		return path
	}
	if path == "" {
		return dir
	}
	return dir + string(os.PathListSeparator) + path
}

// RepairEndpoint is nerve.yaml's extract section as the extractor takes
// it; nil when unset.
func RepairEndpoint(e *config.Endpoint) *workflow.Endpoint {
	if e == nil {
		return nil
	}
	return &workflow.Endpoint{BaseURL: e.BaseURL, Model: e.Model, APIKeyEnv: e.APIKeyEnv, Timeout: e.Timeout.D()}
}
