package reflex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/internal/yamlfile"
	"github.com/nerve-agents/nerve/workflow"
)

// fakeAdapter runs a turn by calling run: it may print (req.OnOutput),
// sleep (fake time, in a synctest bubble) and answer.
type fakeAdapter struct {
	run func(ctx context.Context, req adapter.Request) (*adapter.Result, error)
}

func (f *fakeAdapter) Name() string { return "fake" }
func (f *fakeAdapter) Type() string { return "exec" }
func (f *fakeAdapter) Run(ctx context.Context, req adapter.Request) (*adapter.Result, error) {
	if req.OnStart != nil {
		req.OnStart(4242)
	}
	return f.run(ctx, req)
}

// recorder is every dependency of the executor but the config, keeping
// what it was told.
type recorder struct {
	mu         sync.Mutex
	snapshots  map[string]int // key -> messages
	procs      map[string]int // key/step -> pid, while recorded
	recorded   int
	active     map[string]time.Time
	started    int
	detections []workflow.Event
	hooked     []workflow.Event
}

func newRecorder() *recorder {
	return &recorder{snapshots: map[string]int{}, procs: map[string]int{}, active: map[string]time.Time{}}
}

func (r *recorder) Update(key string, msgs []workflow.Message) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snapshots[key] = len(msgs)
	return "/snapshots/" + key + ".jsonl", nil
}

// Dir is the turn's scratch directory, by thread key and (for a turn's
// own) step.
func (r *recorder) Dir(key string, step int) (string, error) {
	if step > 0 {
		return fmt.Sprintf("/scratch/%s/%d", key, step), nil
	}
	return "/scratch/" + key, nil
}

func (r *recorder) RecordProc(key string, step, pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[fmt.Sprintf("%s/%d", key, step)] = pid
	r.recorded++
}

func (r *recorder) ForgetProc(key string, step int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.procs, fmt.Sprintf("%s/%d", key, step))
}

func (r *recorder) TurnStarted(t *Turn, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active[t.Thread] = at
	r.started++
}

func (r *recorder) TurnEnded(t *Turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, t.Thread)
}

func (r *recorder) Detected(t *Turn, e workflow.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.detections = append(r.detections, e)
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.detections {
		out = append(out, e.Status)
	}
	return out
}

// roles are a definition's roles: plain (no schema) and shaped (a meta
// schema wanting {"ok": bool}).
func roles(t *testing.T) (plain, shaped *workflow.Role) {
	t.Helper()
	def, err := workflow.Parse("t.yaml", []byte(`workflow: t
moderator: '{"done": true}'
roles:
  plain: {adapter: fake, prompt: p}
  shaped:
    adapter: fake
    prompt: p
    meta: {type: object, required: [ok], properties: {ok: {type: boolean}}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return def.Roles["plain"], def.Roles["shaped"]
}

func answer(content string, u usage.Usage) func(context.Context, adapter.Request) (*adapter.Result, error) {
	return func(context.Context, adapter.Request) (*adapter.Result, error) {
		return &adapter.Result{Content: content, Usage: u}, nil
	}
}

// Each case runs one turn in a synctest bubble, so silences of seconds
// take no time and a stall is raised exactly when it is due.
func TestTurnExecutorRun(t *testing.T) {
	plain, shaped := roles(t)
	spent := usage.Usage{InputTokens: usage.Int(10), OutputTokens: usage.Int(5)}
	cases := []struct {
		name    string
		adapter string // default "fake"
		role    *workflow.Role
		run     func(ctx context.Context, req adapter.Request) (*adapter.Result, error)
		cancel  bool // the turn's context ends while it runs

		wantOK      bool
		wantContent string
		wantKind    string // the answer's error kind, "" for none
		wantErr     string // in the error's message
		wantMeta    any
		wantUsage   *usage.Usage
		wantDetect  []string
	}{
		{name: "answer", role: plain, run: answer("done", spent), wantOK: true, wantContent: "done", wantUsage: &spent},
		{name: "structured answer", role: shaped, run: answer("```json\n{\"ok\": true}\n```", spent), wantOK: true,
			wantContent: "```json\n{\"ok\": true}\n```", wantMeta: map[string]any{"ok": true}, wantUsage: &spent},
		{name: "malformed answer", role: shaped, run: answer("not json", spent), wantOK: true, wantContent: "not json",
			wantKind: KindExtract, wantErr: "structured output", wantUsage: &spent, wantDetect: []string{DetectMalformed}},
		{name: "no role definition", role: nil, run: answer("not json", spent), wantOK: true, wantContent: "not json", wantUsage: &spent},
		{name: "tool errors", role: plain, run: answer("done", usage.Usage{ToolErrors: ToolErrorThreshold}), wantOK: true,
			wantContent: "done", wantUsage: &usage.Usage{ToolErrors: ToolErrorThreshold}, wantDetect: []string{DetectErrors}},
		{name: "few tool errors", role: plain, run: answer("done", usage.Usage{ToolErrors: ToolErrorThreshold - 1}), wantOK: true,
			wantContent: "done", wantUsage: &usage.Usage{ToolErrors: ToolErrorThreshold - 1}},
		{name: "silent past stall_after", role: plain, wantOK: true, wantContent: "late", wantUsage: &usage.Usage{},
			run: func(context.Context, adapter.Request) (*adapter.Result, error) {
				time.Sleep(3500 * time.Millisecond) // one silence: one stall, however long
				return &adapter.Result{Content: "late"}, nil
			}, wantDetect: []string{DetectStall}},
		{name: "output keeps a stall away", role: plain, wantOK: true, wantContent: "busy", wantUsage: &usage.Usage{},
			run: func(_ context.Context, req adapter.Request) (*adapter.Result, error) {
				for range 8 {
					time.Sleep(900 * time.Millisecond)
					req.OnOutput([]byte("working"))
				}
				return &adapter.Result{Content: "busy"}, nil
			}},
		{name: "two silences", role: plain, wantOK: true, wantContent: "twice", wantUsage: &usage.Usage{},
			run: func(_ context.Context, req adapter.Request) (*adapter.Result, error) {
				time.Sleep(1500 * time.Millisecond)
				req.OnOutput([]byte("back"))
				time.Sleep(1500 * time.Millisecond)
				return &adapter.Result{Content: "twice"}, nil
			}, wantDetect: []string{DetectStall, DetectStall}},
		{name: "timeout keeps usage", role: plain, wantOK: true, wantKind: KindTimeout, wantErr: "timed out", wantUsage: &spent,
			run: func(context.Context, adapter.Request) (*adapter.Result, error) {
				return nil, &adapter.Error{Adapter: "fake", Reason: "timed out after 1s", ExitStatus: -1, Usage: &spent, Err: adapter.ErrTimeout}
			}},
		{name: "failure keeps usage and counts tool errors", role: plain, wantOK: true, wantKind: KindAdapter, wantErr: "no result event",
			wantUsage: &usage.Usage{ToolErrors: 7}, wantDetect: []string{DetectErrors},
			run: func(context.Context, adapter.Request) (*adapter.Result, error) {
				return nil, &adapter.Error{Adapter: "fake", Reason: "no result event", ExitStatus: 1, Usage: &usage.Usage{ToolErrors: 7}}
			}},
		{name: "pricing fills a cost from tokens", role: plain, run: answer("done", usage.Usage{Model: "m-priced",
			InputTokens: usage.Int(1000), OutputTokens: usage.Int(100), CacheReadTokens: usage.Int(2000)}), wantOK: true, wantContent: "done",
			wantUsage: &usage.Usage{Model: "m-priced", InputTokens: usage.Int(1000), OutputTokens: usage.Int(100),
				CacheReadTokens: usage.Int(2000), CostUSD: usage.Float(0.004)}},
		{name: "the CLI's own cost is kept", role: plain, run: answer("done", usage.Usage{Model: "m-priced",
			InputTokens: usage.Int(1000), CostUSD: usage.Float(0.5)}), wantOK: true, wantContent: "done",
			wantUsage: &usage.Usage{Model: "m-priced", InputTokens: usage.Int(1000), CostUSD: usage.Float(0.5)}},
		{name: "an unpriced model's cost stays unknown", role: plain, run: answer("done", usage.Usage{Model: "m-other",
			InputTokens: usage.Int(1000)}), wantOK: true, wantContent: "done",
			wantUsage: &usage.Usage{Model: "m-other", InputTokens: usage.Int(1000)}},
		{name: "a failed turn's tokens are priced", role: plain, wantOK: true, wantKind: KindTimeout, wantErr: "timed out",
			wantUsage: &usage.Usage{Model: "m-priced", OutputTokens: usage.Int(1000), CostUSD: usage.Float(0.01)},
			run: func(context.Context, adapter.Request) (*adapter.Result, error) {
				return nil, &adapter.Error{Adapter: "fake", Reason: "timed out after 1s", ExitStatus: -1, Err: adapter.ErrTimeout,
					Usage: &usage.Usage{Model: "m-priced", OutputTokens: usage.Int(1000)}}
			}},
		{name: "unknown adapter", adapter: "ghost", role: plain, run: answer("never", spent), wantOK: true,
			wantKind: KindAdapter, wantErr: `unknown adapter "ghost" on agent tester`},
		{name: "cancelled", role: plain, cancel: true, wantOK: false,
			run: func(ctx context.Context, _ adapter.Request) (*adapter.Result, error) {
				<-ctx.Done()
				return nil, &adapter.Error{Adapter: "fake", Reason: "cancelled", ExitStatus: -1, Err: ctx.Err()}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				cfg := config.Defaults(t.TempDir())
				cfg.Agent.Name = "tester"
				cfg.Pricing = map[string]usage.Price{"m-priced": {Input: 2, Output: 10, CacheRead: 0.5}}
				cfg.Adapters["fake"] = config.Adapter{Type: "exec", Command: []string{"nerve", "thread", "messages"}}
				cfg.Daemon.StallAfter = yamlfile.Duration(time.Second)
				var made []string
				x := NewExecutor(Deps{
					Config: func() *config.Config { return cfg }, Executable: "/opt/nerve/bin/nerve", Home: "/home/n",
					Snapshots: rec, Procs: rec, Tracker: rec, Scratch: rec,
					NewAdapter: func(name string, c config.Adapter) (adapter.Adapter, error) {
						made = append(made, strings.Join(c.Command, " "))
						return &fakeAdapter{run: tc.run}, nil
					},
				})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancel {
					go func() {
						synctest.Wait() // the adapter runs and waits
						cancel()
					}()
				}
				name := tc.adapter
				if name == "" {
					name = "fake"
				}
				var hooked []workflow.Event
				turn := &Turn{Thread: "thread-1", Ref: "t#thread-1", Key: "thread-1", Step: 3, Role: "r", Adapter: name,
					Prompt: "go", History: make([]workflow.Message, 2),
					RoleDef:  func() *workflow.Role { return tc.role },
					Detected: func(e workflow.Event) { hooked = append(hooked, e) },
				}
				a, ok := x.Run(ctx, turn)
				if ok != tc.wantOK {
					t.Fatalf("ok = %v, want %v (answer %+v)", ok, tc.wantOK, a)
				}
				if a.Content != tc.wantContent {
					t.Errorf("content %q, want %q", a.Content, tc.wantContent)
				}
				switch {
				case tc.wantKind == "" && a.Error != nil:
					t.Errorf("unexpected error %+v", a.Error)
				case tc.wantKind != "" && (a.Error == nil || a.Error.Kind != tc.wantKind || !strings.Contains(a.Error.Message, tc.wantErr)):
					t.Errorf("error %+v, want kind %s with %q", a.Error, tc.wantKind, tc.wantErr)
				}
				if fmt.Sprint(a.Meta) != fmt.Sprint(tc.wantMeta) {
					t.Errorf("meta %v, want %v", a.Meta, tc.wantMeta)
				}
				if (a.Usage == nil) != (tc.wantUsage == nil) || a.Usage != nil && !a.Usage.Equal(*tc.wantUsage) {
					t.Errorf("usage %+v, want %+v", a.Usage, tc.wantUsage)
				}
				if got := rec.kinds(); !slices.Equal(got, tc.wantDetect) {
					t.Errorf("detections %v, want %v", got, tc.wantDetect)
				}
				if len(hooked) != len(tc.wantDetect) {
					t.Errorf("the turn's hook saw %d detections, the tracker %d", len(hooked), len(tc.wantDetect))
				}
				for _, e := range rec.detections {
					if e.Type != workflow.EventDetection || e.Step != 3 || e.Role != "r" || e.Adapter != name || e.Message == "" {
						t.Errorf("detection %+v", e)
					}
				}
				if len(rec.active) != 0 || len(rec.procs) != 0 {
					t.Errorf("left behind: active %v, process records %v", rec.active, rec.procs)
				}
				if tc.adapter == "" {
					if rec.started != 1 || rec.recorded != 1 || rec.snapshots["thread-1"] != 2 {
						t.Errorf("started %d, recorded %d processes, snapshots %v", rec.started, rec.recorded, rec.snapshots)
					}
					if !slices.Equal(made, []string{"/opt/nerve/bin/nerve thread messages"}) {
						t.Errorf("an exec adapter's nerve must be the running binary: %v", made)
					}
				}
			})
		})
	}
}

// The agent's environment: the thread, role and step, its workdir (a
// remote turn's own scratch directory) and snapshot, NERVE_HOME, and the
// running binary first on PATH.
func TestTurnExecutorEnvironment(t *testing.T) {
	cfg := config.Defaults(t.TempDir())
	cfg.Adapters["fake"] = config.Adapter{Type: "exec", Command: []string{"true"}}
	cfg.Daemon.Sandbox = "none" // TestTurnExecutorSandbox has the sandbox's
	rec := newRecorder()
	var env []string
	x := NewExecutor(Deps{
		Config: func() *config.Config { return cfg }, Executable: "/opt/nerve/bin/nerve", Home: "/home/n",
		Snapshots: rec, Procs: rec, Tracker: rec, Scratch: rec,
		NewAdapter: func(string, config.Adapter) (adapter.Adapter, error) {
			return &fakeAdapter{run: func(_ context.Context, req adapter.Request) (*adapter.Result, error) {
				env = req.Env
				if req.Workdir != "/scratch/origin--w--thread-9/4" || req.Prompt != "go" {
					return nil, errors.New("workdir " + req.Workdir + ", prompt " + req.Prompt)
				}
				return &adapter.Result{Content: "ok"}, nil
			}}, nil
		},
	})
	a, ok := x.Run(context.Background(), &Turn{Thread: "origin/w#thread-9", Ref: "origin/w#thread-9", Key: "origin--w--thread-9",
		Step: 4, Role: "author", Adapter: "fake", Prompt: "go", OwnScratch: true})
	if !ok || a.Error != nil {
		t.Fatalf("run: %+v %v", a, ok)
	}
	want := []string{
		"NERVE_THREAD=origin/w#thread-9", "NERVE_ROLE=author", "NERVE_STEP=4", "NERVE_WORKDIR=/scratch/origin--w--thread-9/4",
		"NERVE_THREAD_SNAPSHOT=/snapshots/origin--w--thread-9.jsonl", "NERVE_HOME=/home/n",
		"PATH=" + pathWithNerve(os.Getenv("PATH"), "/opt/nerve/bin/nerve"),
	}
	if !slices.Equal(env, want) {
		t.Fatalf("env\n got %q\nwant %q", env, want)
	}
}

func TestPathWithNerve(t *testing.T) {
	for _, c := range []struct{ path, exe, want string }{
		{"/usr/bin:/bin", "/opt/n/nerve", "/opt/n:/usr/bin:/bin"},
		{"/opt/n:/usr/bin", "/opt/n/nerve", "/opt/n:/usr/bin"},
		{"/opt/n", "/opt/n/nerve", "/opt/n"},
		{"", "/opt/n/nerve", "/opt/n"},
		{"/usr/bin", "", "/usr/bin"},
	} {
		if got := pathWithNerve(c.path, c.exe); got != c.want {
			t.Errorf("pathWithNerve(%q, %q) = %q, want %q", c.path, c.exe, got, c.want)
		}
	}
}
