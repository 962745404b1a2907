package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// BenchmarkStartThread compares starting a top-level local thread (what
// POST /v1/threads does: the definition found by name and checked, inputs
// checked, the thread stored and launched) with starting a child of a running thread (the same, plus the
// depth check, the parent link and the child.started event), side by side.
func BenchmarkStartThread(b *testing.B) {
	home := b.TempDir()
	cfg := config.Defaults(home)
	cfg.Workflows = []string{filepath.Join(home, "workflows")}
	os.MkdirAll(cfg.Workflows[0], 0o700)
	src := "workflow: quick\nmoderator: '{\"done\": true}'\ninputs: {n: {type: integer}}\nroles: {w: {adapter: example, prompt: x}}\n"
	if err := os.WriteFile(filepath.Join(cfg.Workflows[0], "quick.yaml"), []byte(src), 0o600); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(config.Paths{Home: home}.DB(), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	d := &Daemon{paths: config.Paths{Home: home}, log: slog.New(slog.DiscardHandler), store: st, cfg: cfg}
	r := newRunner(d, context.Background())
	defer r.wait()
	ctx := context.Background()
	in := map[string]any{"n": 1}
	b.Run("top-level", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			def, err := workflow.Find(cfg.Workflows, "quick")
			if err != nil {
				b.Fatal(err)
			}
			if err := checkRunnable(def, cfg); err != nil {
				b.Fatal(err)
			}
			input, err := def.CheckInputs(in)
			if err != nil {
				b.Fatal(err)
			}
			ws, err := workspaceRequest(def, StartRequest{Workdir: home})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.start(ctx, def, threadSpec{Input: input, Workdir: home, Workspace: ws}); err != nil {
				b.Fatal(err)
			}
		}
	})
	parent := &workflow.Thread{Workflow: "boss", Status: workflow.StatusRunning, Workdir: home}
	if err := st.CreateThread(parent); err != nil {
		b.Fatal(err)
	}
	b.Run("child", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			link := &workflow.Parent{Ref: "boss#" + parent.ID, Thread: parent.ID, Step: i + 1}
			if _, err := r.startChild(ctx, parent, link, "quick", in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
