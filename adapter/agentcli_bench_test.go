package adapter

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/fakemodel"
	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// buildNerve builds the nerve binary into dir, for its MCP server.
func buildNerve(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "nerve")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/nerve").CombinedOutput(); err != nil {
		b.Fatalf("build nerve: %v\n%s", err, out)
	}
	return bin
}

const benchWord = "The code word is plum-4417."

// BenchmarkAgentCLITurn runs one turn through each real agent CLI (skipped
// when not installed) against the fake model endpoint, which has the agent
// read its thread through nerve's MCP server and quote it: through nerve's
// adapter (Run), and by hand with the very argv and environment the
// adapter built, alternating in the same run. nerve-ms and hand-ms are
// each a turn's mean wall time; overhead-ms is their difference, and
// min-overhead-ms the difference of the fastest turns. Of a turn through
// nerve, spawn-ms is Run called to the CLI started (nerve's own: the
// invocation, temp files, env), first-event-ms the CLI started to its
// first stdout line (the CLI's start-up), and stored-ms its last line to
// Run's result (the CLI's exit, nerve's group kill, drain and parse).
//
//	go test -run '^$' -bench AgentCLITurn -benchtime 5x ./adapter
func BenchmarkAgentCLITurn(b *testing.B) {
	var nerve string // built on first use, kept for every CLI
	binDir := b.TempDir
	for _, cli := range fakemodel.CLIs {
		b.Run(cli, func(b *testing.B) {
			path, err := exec.LookPath(fakemodel.Binary(cli))
			if err != nil {
				b.Skipf("%s is not installed", cli)
			}
			if nerve == "" {
				nerve = buildNerve(b, binDir())
			}
			m := fakemodel.Start(b, "agent")
			dir := b.TempDir()
			model, env, err := fakemodel.Setup(cli, dir, m.URL)
			if err != nil {
				b.Fatal(err)
			}
			perm := ""
			if cli == "pi" {
				perm = PermFull // pi reads its thread with its shell, which only full gives it
			}
			a, err := New(cli, Spec{Model: model, Env: env, Permissions: perm, Timeout: yamlfile.Duration(4 * time.Minute)})
			if err != nil {
				b.Fatal(err)
			}
			ca := a.(*cliAdapter)
			work := filepath.Join(dir, "work")
			os.MkdirAll(work, 0o700)
			snap := filepath.Join(dir, "snapshot.jsonl")
			os.WriteFile(snap, []byte(`{"step":1,"role":"scribe","agent":"a","content":"`+benchWord+`"}`+"\n"), 0o600)
			turn := []string{"NERVE_THREAD=quote#thread-1", "NERVE_ROLE=agent", "NERVE_STEP=2", "NERVE_WORKDIR=" + work,
				"NERVE_THREAD_SNAPSHOT=" + snap, "NERVE_HOME=" + dir,
				"PATH=" + filepath.Dir(nerve) + string(os.PathListSeparator) + os.Getenv("PATH")}
			req := Request{Prompt: "Quote the previous message of this thread.", Workdir: work, Env: turn,
				MCP: &MCPServer{Command: nerve, Args: []string{"mcp"}, Env: turn}}
			want := "Quoted: " + benchWord
			// One turn first, untimed: the first run of a CLI (and of the
			// fresh nerve binary) pays for cold caches.
			if _, err := a.Run(context.Background(), req); err != nil {
				b.Fatalf("warm-up turn: %v", err)
			}
			var viaNerve, byHand, spawn, firstEvent, stored time.Duration
			minNerve, minHand := time.Duration(1<<62), time.Duration(1<<62)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var started, first, last time.Time
				req.OnStart = func(int) { started = time.Now() }
				req.OnOutput = func([]byte) {
					if first.IsZero() {
						first = time.Now()
					}
					last = time.Now()
				}
				start := time.Now()
				res, err := a.Run(context.Background(), req)
				d := time.Since(start)
				spawn += started.Sub(start)
				firstEvent += first.Sub(started)
				stored += start.Add(d).Sub(last)
				viaNerve, minNerve = viaNerve+d, min(minNerve, d)
				if err != nil || res.Content != want {
					b.Fatalf("through nerve: %v %+v", err, res)
				}

				inv, err := ca.build(ca, req)
				if err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command(path, inv.args...)
				cmd.Args[0] = cli
				cmd.Env = mergeEnv(os.Environ(), inv.env, sortedEnv(env), req.Env)
				cmd.Dir = work
				var out bytes.Buffer
				cmd.Stdout = &out
				start = time.Now()
				err = cmd.Run()
				d = time.Since(start)
				byHand, minHand = byHand+d, min(minHand, d)
				if inv.cleanup != nil {
					inv.cleanup()
				}
				if err != nil || !strings.Contains(out.String(), want) {
					b.Fatalf("by hand: %v\n%s", err, out.String())
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(viaNerve.Milliseconds())/n, "nerve-ms")
			b.ReportMetric(float64(byHand.Milliseconds())/n, "hand-ms")
			b.ReportMetric(float64((viaNerve-byHand).Milliseconds())/n, "overhead-ms")
			// The fastest turn of each: less noise than the means.
			b.ReportMetric(float64((minNerve - minHand).Milliseconds()), "min-overhead-ms")
			b.ReportMetric(float64(spawn.Microseconds())/n/1000, "spawn-ms")
			b.ReportMetric(float64(firstEvent.Milliseconds())/n, "first-event-ms")
			b.ReportMetric(float64(stored.Microseconds())/n/1000, "stored-ms")
		})
	}
}
