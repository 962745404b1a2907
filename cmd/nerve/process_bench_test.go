package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkProcess times whole commands as an agent or a user runs them:
// a process each, p50 and p90 of b.N runs, beside /bin/true (fork+exec of
// nothing) in the same run. NERVE_BASELINE_BIN=path runs the same commands
// with another binary too (e.g. main's), for a before/after:
//
//	go test ./cmd/nerve -run '^$' -bench Process -benchtime 300x
//
// With a baseline, each iteration runs both binaries one after the other
// (which goes first alternates), and delta-ms is the median of their
// differences: a shared machine's slow spells hit both alike. Both are
// run from fresh copies: a binary the Go linker has just written starts
// slower than a copy of it (2.5 ms of 30 on a test VM), which would
// favour whichever binary was built longer ago.
//
// knowledge-query indexes a copy of $GOROOT/src first (about a minute),
// and runs once without a daemon and once with the home's daemon running.
func BenchmarkProcess(b *testing.B) {
	bin := copyBin(b, nerveBin(b))
	base := ""
	if p := os.Getenv("NERVE_BASELINE_BIN"); p != "" {
		base = copyBin(b, p)
	}
	b.Run("true", func(b *testing.B) { benchProcess(b, exec.Command("true"), "") })
	snap := benchSnapshot(b, 20)
	b.Run("version", func(b *testing.B) { benchProcess(b, exec.Command(bin, "version"), base) })
	b.Run("thread-messages-last-3", func(b *testing.B) {
		cmd := exec.Command(bin, "thread", "messages", "--last", "3")
		cmd.Env = os.Environ()
		for k, v := range snap {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		benchProcess(b, cmd, base)
	})
	if os.Getenv("NERVE_BENCH_GOROOT") == "" {
		return // the GOROOT index takes a minute to build
	}
	root := filepath.Join(b.TempDir(), "src")
	if out, err := exec.Command("cp", "-r", filepath.Join(runtime.GOROOT(), "src"), root).CombinedOutput(); err != nil {
		b.Fatalf("copy GOROOT/src: %v\n%s", err, out)
	}
	home := b.TempDir()
	sync := exec.Command(bin, "knowledge", "sync", "--repo", root)
	sync.Env = append(os.Environ(), "NERVE_HOME="+home)
	if out, err := sync.CombinedOutput(); err != nil {
		b.Fatalf("knowledge sync: %v\n%s", err, out)
	}
	query := exec.Command(bin, "knowledge", "query", "--repo", root, "where are RFC 3339 timestamps parsed")
	query.Dir = root
	query.Env = append(os.Environ(), "NERVE_HOME="+home, "NERVE_NO_AUTOSTART=1")
	b.Run("knowledge-query-goroot", func(b *testing.B) { benchProcess(b, query, base) })
	// The same with the home's daemon running, as inside a turn: it
	// answers from the index it keeps open (a baseline without that
	// queries in its own process).
	start := exec.Command(bin, "daemon", "start")
	start.Env = query.Env
	if out, err := start.CombinedOutput(); err != nil {
		b.Fatalf("daemon start: %v\n%s", err, out)
	}
	defer func() {
		stop := exec.Command(bin, "daemon", "stop")
		stop.Env = query.Env
		stop.Run()
	}()
	b.Run("knowledge-query-goroot-daemon", func(b *testing.B) { benchProcess(b, query, base) })
}

// copyBin copies the binary at path into a fresh file.
func copyBin(b *testing.B, path string) string {
	src, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(b.TempDir(), filepath.Base(path))
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(f, src)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	return dst
}

// benchProcess runs a copy of cmd b.N times, and as many with the binary
// base instead when base is set, alternately; each must succeed.
func benchProcess(b *testing.B, cmd *exec.Cmd, base string) {
	run := func(path string) time.Duration {
		c := exec.Command(path, cmd.Args[1:]...)
		c.Dir, c.Env = cmd.Dir, cmd.Env
		var out strings.Builder
		c.Stdout = &out
		c.Stderr = &out
		start := time.Now()
		err := c.Run()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out.String())
		}
		return d
	}
	var lat, baseLat, delta []time.Duration
	for i := 0; b.Loop(); i++ {
		if base == "" {
			lat = append(lat, run(cmd.Path))
			continue
		}
		var d, bd time.Duration
		if i%2 == 0 {
			d, bd = run(cmd.Path), run(base)
		} else {
			bd, d = run(base), run(cmd.Path)
		}
		lat, baseLat, delta = append(lat, d), append(baseLat, bd), append(delta, d-bd)
	}
	reportPercentiles(b, lat)
	if base != "" {
		slices.Sort(baseLat)
		slices.Sort(delta)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(baseLat[len(baseLat)/2]), "baseline-p50-ms")
		b.ReportMetric(ms(baseLat[len(baseLat)*9/10]), "baseline-p90-ms")
		b.ReportMetric(ms(delta[len(delta)/2]), "delta-ms")
	}
}
