package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkProcess times whole commands as an agent or a user runs them:
// a process each, p50 and p90 of b.N runs, beside /bin/true (fork+exec of
// nothing) in the same run. NERVE_BASELINE_BIN=path runs the same commands
// with another binary too (e.g. main's), for a before/after:
//
//	go test ./cmd/nerve -run '^$' -bench Process -benchtime 200x
//
// knowledge-query indexes a copy of $GOROOT/src first (about a minute).
func BenchmarkProcess(b *testing.B) {
	bins := map[string]string{"": nerveBin(b)}
	if base := os.Getenv("NERVE_BASELINE_BIN"); base != "" {
		bins["baseline-"] = base
	}
	b.Run("true", func(b *testing.B) { benchProcess(b, exec.Command("true")) })
	snap := benchSnapshot(b, 20)
	for prefix, bin := range bins {
		b.Run(prefix+"version", func(b *testing.B) { benchProcess(b, exec.Command(bin, "version")) })
		b.Run(prefix+"thread-messages-last-3", func(b *testing.B) {
			cmd := exec.Command(bin, "thread", "messages", "--last", "3")
			cmd.Env = os.Environ()
			for k, v := range snap {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			benchProcess(b, cmd)
		})
	}
	if os.Getenv("NERVE_BENCH_GOROOT") == "" {
		return // the GOROOT index takes a minute to build
	}
	root := filepath.Join(b.TempDir(), "src")
	if out, err := exec.Command("cp", "-r", filepath.Join(runtime.GOROOT(), "src"), root).CombinedOutput(); err != nil {
		b.Fatalf("copy GOROOT/src: %v\n%s", err, out)
	}
	home := b.TempDir()
	sync := exec.Command(bins[""], "knowledge", "sync", "--repo", root)
	sync.Env = append(os.Environ(), "NERVE_HOME="+home)
	if out, err := sync.CombinedOutput(); err != nil {
		b.Fatalf("knowledge sync: %v\n%s", err, out)
	}
	for prefix, bin := range bins {
		b.Run(prefix+"knowledge-query-goroot", func(b *testing.B) {
			cmd := exec.Command(bin, "knowledge", "query", "--repo", root, "where are RFC 3339 timestamps parsed")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "NERVE_HOME="+home)
			benchProcess(b, cmd)
		})
	}
}

// benchProcess runs a copy of cmd b.N times; each must succeed.
func benchProcess(b *testing.B, cmd *exec.Cmd) {
	var lat []time.Duration
	for b.Loop() {
		c := exec.Command(cmd.Path, cmd.Args[1:]...)
		c.Dir, c.Env = cmd.Dir, cmd.Env
		var out strings.Builder
		c.Stdout = &out
		c.Stderr = &out
		start := time.Now()
		err := c.Run()
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out.String())
		}
	}
	reportPercentiles(b, lat)
}
