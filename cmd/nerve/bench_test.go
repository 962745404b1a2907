package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkCLI times whole invocations of the real binary, the way a user
// or a script sees them, and reports the idle daemon's memory.
func BenchmarkCLI(b *testing.B) {
	home, err := os.MkdirTemp("", "nb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(home)
	env := append(os.Environ(), "NERVE_HOME="+home)
	run := func(b *testing.B, args ...string) {
		cmd := exec.Command(nerveBin(b), args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("nerve %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(filepath.Join(home, "workflows"), 0o700)
	for _, f := range []string{"code-review.yaml", "code-review.jsonata", "review-panel.yaml"} {
		src, _ := os.ReadFile(filepath.Join("..", "..", "examples", f))
		os.WriteFile(filepath.Join(home, "workflows", f), src, 0o600)
	}
	b.Run("true", func(b *testing.B) { // the floor: a fork+exec of nothing
		for i := 0; i < b.N; i++ {
			exec.Command("true").Run()
		}
	})
	b.Run("version", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			run(b, "version")
		}
	})
	run(b, "daemon", "start")
	defer run(b, "daemon", "stop")
	b.Run("workflow-list", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			run(b, "workflow", "list")
		}
	})
	b.Run("daemon-status", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			run(b, "daemon", "status")
		}
	})
	b.Run("daemon-idle-rss", func(b *testing.B) {
		time.Sleep(time.Second)
		pid, _ := os.ReadFile(filepath.Join(home, "nerve.pid"))
		status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/status")
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				kb, _ := strconv.Atoi(strings.Fields(l)[1])
				b.ReportMetric(float64(kb)/1024, "MiB")
			}
		}
		for i := 0; i < b.N; i++ {
		}
	})
}
