package procgroup

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A helper leads a group of its own, registered, with its name in its
// environment, from its fork until Run returns; cancelling it kills the
// whole group, what it started with it.
func TestRunRegistersTheHelperWhileItRuns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := Command(ctx, "sh", "-c", `sleep 30 & echo "$$ $! $`+HelperEnv+`" >"$0"; wait`, out)
	done := make(chan error, 1)
	go func() { done <- Run(cmd) }()
	var f []string
	for deadline := time.Now().Add(10 * time.Second); len(f) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the helper did not start")
		}
		b, _ := os.ReadFile(out)
		if strings.HasSuffix(string(b), "\n") {
			f = strings.Fields(string(b))
		}
	}
	leader, _ := strconv.Atoi(f[0])
	child, _ := strconv.Atoi(f[1])
	if pgid, _ := syscall.Getpgid(child); pgid != leader || !HelperGroup(leader) || !HelperRunning(f[2]) {
		t.Fatalf("the running helper: group %d of its child, leader %d registered %v, %s=%q running %v",
			pgid, leader, HelperGroup(leader), HelperEnv, f[2], HelperRunning(f[2]))
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled helper succeeded")
	}
	if HelperGroup(leader) || HelperRunning(f[2]) {
		t.Error("the ended helper is still registered")
	}
	for deadline := time.Now().Add(5 * time.Second); running(child); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the helper's child outlived its cancel")
		}
	}
}

// running: process pid exists and is no zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}
