package procstat

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A process that has exited but is not reaped yet (a zombie) has
// stopped: `nerve daemon stop` must not wait for a late init to reap the
// daemon.
func TestExitedSeesZombies(t *testing.T) {
	done := exec.Command("true")
	if err := done.Start(); err != nil {
		t.Fatal(err)
	}
	pid := done.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for !Exited(pid) {
		if time.Now().After(deadline) {
			t.Fatal("an exited, unreaped process is not seen as exited")
		}
		time.Sleep(time.Millisecond)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the process was reaped already: the test proves nothing")
	}
	done.Wait()
	if !Exited(pid) {
		t.Fatal("a reaped process is not seen as exited")
	}

	running := exec.Command("sleep", "30")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { running.Process.Kill(); running.Wait() }()
	if Exited(running.Process.Pid) {
		t.Fatal("a running process is seen as exited")
	}
}

// A process's CPU time grows as it works; a process that is gone has none
// to read.
func TestCPU(t *testing.T) {
	self := syscall.Getpid()
	before, err := CPU(self)
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
	}
	after, err := CPU(self)
	if err != nil || after <= before {
		t.Fatalf("CPU %v then %v after 100 ms of work (%v)", before, after, err)
	}
	if _, err := CPU(1 << 30); err == nil {
		t.Fatal("CPU of no process has no error")
	}
}
