package adapter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/fakemodel"
	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// benchSpec is a turn's sandbox as the executor builds it: the workdir,
// HOME empty, NERVE_HOME hidden, the snapshot and nerve reachable, the
// environment from the allow-list.
func benchSpec(work, nerveHome, snap string, env []string) *sandbox.Spec {
	base := []string{}
	for _, k := range []string{"HOME", "LANG", "TERM", "PATH"} {
		if v, ok := os.LookupEnv(k); ok {
			base = append(base, k+"="+v)
		}
	}
	return &sandbox.Spec{Workdir: work, Home: os.Getenv("HOME"), Hide: []string{nerveHome}, Read: []string{snap},
		Env: append(base, env...), Network: sandbox.NetAllowList}
}

// BenchmarkSandboxTurn is one exec-adapter turn (a shell script that reads
// its prompt and answers) without a sandbox and in bwrap, side by side:
// the difference of the two ns/op is what the sandbox costs a turn.
//
//	go test -run '^$' -bench SandboxTurn -benchtime 200x ./adapter
func BenchmarkSandboxTurn(b *testing.B) {
	if err := sandbox.Available(); err != nil {
		b.Skip(err)
	}
	dir := b.TempDir()
	work, nerveHome := filepath.Join(dir, "work"), filepath.Join(dir, "nh")
	snap := filepath.Join(nerveHome, "snapshots", "t.jsonl")
	os.MkdirAll(work, 0o700)
	os.MkdirAll(filepath.Dir(snap), 0o700)
	os.WriteFile(snap, []byte("{}\n"), 0o600)
	agent := filepath.Join(dir, "bin", "agent.sh")
	os.MkdirAll(filepath.Dir(agent), 0o700)
	os.WriteFile(agent, []byte("#!/bin/sh\ncat >/dev/null\necho answer\n"), 0o700)
	a, err := New("fake", Spec{Type: "exec", Command: []string{agent}})
	if err != nil {
		b.Fatal(err)
	}
	turn := []string{"NERVE_THREAD=w#thread-1", "NERVE_ROLE=r", "NERVE_STEP=1", "NERVE_WORKDIR=" + work, "NERVE_THREAD_SNAPSHOT=" + snap}
	plain := Request{Prompt: "go", Workdir: work, Env: turn}
	boxed := plain
	boxed.Sandbox = benchSpec(work, nerveHome, snap, turn)
	sideBySide(b, a, plain, boxed, "answer")
}

// sideBySide runs req without and with its sandbox: as sub-benchmarks
// none and bwrap, then alternating turn by turn in "both", so that both
// see the same load (this machine is shared), reporting each one's mean,
// their difference (overhead-ms) and the difference of the fastest turns
// (min-overhead-ms, the least noisy).
func sideBySide(b *testing.B, a Adapter, plain, boxed Request, want string) {
	turn := func(b *testing.B, req Request) time.Duration {
		start := time.Now()
		res, err := a.Run(context.Background(), req)
		d := time.Since(start)
		if err != nil || !strings.Contains(res.Content, want) {
			b.Fatalf("turn: %v %+v", err, res)
		}
		return d
	}
	turn(b, plain) // warm caches: the first run of a CLI pays for them
	turn(b, boxed)
	b.Run("none", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			turn(b, plain)
		}
	})
	b.Run("bwrap", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			turn(b, boxed)
		}
	})
	b.Run("both", func(b *testing.B) {
		var none, bwrap time.Duration
		minNone, minBwrap := time.Duration(1<<62), time.Duration(1<<62)
		for i := 0; i < b.N; i++ {
			d := turn(b, plain)
			none, minNone = none+d, min(minNone, d)
			d = turn(b, boxed)
			bwrap, minBwrap = bwrap+d, min(minBwrap, d)
		}
		n := float64(b.N)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(none)/n, "none-ms")
		b.ReportMetric(ms(bwrap)/n, "bwrap-ms")
		b.ReportMetric(ms(bwrap-none)/n, "overhead-ms")
		b.ReportMetric(ms(minBwrap-minNone), "min-overhead-ms")
	})
}

// BenchmarkSandboxCLITurn is the same with a real CLI (claude, skipped
// when not installed) against the fake model endpoint, which it reaches
// on loopback (network: open here; the allow-list's proxy is measured on
// its own).
//
//	go test -run '^$' -bench SandboxCLITurn -benchtime 10x ./adapter
func BenchmarkSandboxCLITurn(b *testing.B) {
	if err := sandbox.Available(); err != nil {
		b.Skip(err)
	}
	const cli = "claude"
	path, err := lookPath(cli, os.Getenv("PATH"), "")
	if err != nil {
		b.Skipf("%s is not installed", cli)
	}
	m := fakemodel.Start(b, "agent")
	dir := b.TempDir()
	model, env, err := fakemodel.Setup(cli, dir, m.URL)
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(cli, Spec{Model: model, Env: env, Timeout: yamlfile.Duration(2 * time.Minute)})
	if err != nil {
		b.Fatal(err)
	}
	work, nerveHome := filepath.Join(dir, "work"), filepath.Join(dir, "nh")
	snap := filepath.Join(nerveHome, "snapshot.jsonl")
	os.MkdirAll(work, 0o700)
	os.MkdirAll(nerveHome, 0o700)
	os.WriteFile(snap, []byte(`{"step":1,"role":"scribe","agent":"a","content":"`+benchWord+`"}`+"\n"), 0o600)
	turn := []string{"NERVE_THREAD=quote#thread-1", "NERVE_ROLE=agent", "NERVE_STEP=2", "NERVE_WORKDIR=" + work, "NERVE_THREAD_SNAPSHOT=" + snap}
	plain := Request{Prompt: "Say hello.", Workdir: work, Env: turn}
	boxed := plain
	s := benchSpec(work, nerveHome, snap, turn)
	// The CLI's HOME (the adapter's env) is its state.
	s.State = []sandbox.Bind{{Src: env["HOME"], Dst: env["HOME"], Write: true}}
	s.Network = sandbox.NetOpen
	boxed.Sandbox = s
	if _, err := a.Run(context.Background(), plain); err != nil {
		b.Fatalf("%s at %s: %v", cli, path, err)
	}
	sideBySide(b, a, plain, boxed, "")
}
