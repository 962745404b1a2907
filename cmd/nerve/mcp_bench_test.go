package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nerve-agents/nerve/workflow"
)

// The MCP figures of DESIGN.md's issue: a thread_messages call inside a
// turn, round trip from the client (p50 ≤ 3 ms), and `nerve mcp` from
// start to answering initialize (≤ 20 ms). Each is reported beside a
// baseline measured in the same run: `nerve thread messages` as a
// subprocess for the same query, and `nerve version`'s start.
//
//	go test ./cmd/nerve -run '^$' -bench 'MCP' -benchtime 200x

// benchSnapshot writes a turn's snapshot of n messages of a few KiB, as
// agents' answers are, and returns the turn's environment.
func benchSnapshot(b *testing.B, n int) map[string]string {
	dir := b.TempDir()
	path := filepath.Join(dir, "w--thread-1.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	enc := json.NewEncoder(f)
	at := time.Now().Add(-time.Hour).UTC()
	for i := 1; i <= n; i++ {
		role := []string{"author", "reviewer"}[i%2]
		m := workflow.Message{Step: i, Role: role, Agent: "laptop-1", Adapter: "claude", At: at.Add(time.Duration(i) * time.Minute),
			Content: strings.Repeat(fmt.Sprintf("step %d: a paragraph of the %s's answer. ", i, role), 60),
			Meta:    map[string]any{"approved": i%4 == 0, "findings": []string{"one", "two"}}}
		if err := enc.Encode(m); err != nil {
			b.Fatal(err)
		}
	}
	f.Close()
	return map[string]string{"NERVE_HOME": dir, "NERVE_THREAD": "w#thread-1", "NERVE_THREAD_SNAPSHOT": path, "NERVE_STEP": fmt.Sprint(n + 1)}
}

func benchCmd(b *testing.B, vars map[string]string, args ...string) *exec.Cmd {
	cmd := exec.Command(nerveBin(b), args...)
	cmd.Env = append(os.Environ(), "NERVE_NO_AUTOSTART=1")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// reportPercentiles reports the median and p90 of lat in ms.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*9/10]), "p90-ms")
}

func BenchmarkMCPThreadMessagesInTurn(b *testing.B) {
	vars := benchSnapshot(b, 20)
	b.Run("mcp", func(b *testing.B) {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(context.Background(), &sdk.CommandTransport{Command: benchCmd(b, vars, "mcp")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := &sdk.CallToolParams{Name: "thread_messages", Arguments: map[string]any{"last": 3}}
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			res, err := cs.CallTool(context.Background(), params)
			lat = append(lat, time.Since(start))
			if err != nil || res.IsError {
				b.Fatalf("thread_messages: %v %+v", err, res)
			}
		}
		reportPercentiles(b, lat)
	})
	b.Run("cli-baseline", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			out, err := benchCmd(b, vars, "thread", "messages", "--last", "3", "--json").Output()
			lat = append(lat, time.Since(start))
			if err != nil || strings.Count(string(out), "\n") != 3 {
				b.Fatalf("nerve thread messages: %v %q", err, out)
			}
		}
		reportPercentiles(b, lat)
	})
}

func BenchmarkMCPStartToInitialize(b *testing.B) {
	vars := map[string]string{"NERVE_HOME": b.TempDir()}
	b.Run("mcp", func(b *testing.B) {
		client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: benchCmd(b, vars, "mcp")}, nil)
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cs.Close()
			b.StartTimer()
		}
		reportPercentiles(b, lat)
	})
	b.Run("version-baseline", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			err := benchCmd(b, vars, "version").Run()
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
		}
		reportPercentiles(b, lat)
	})
}
