package daemon

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
)

// A daemon killed while adapters run leaves their lines in procs/slots;
// the next one kills exactly the groups still running, skips blanked,
// torn and dead records, and reads the one-file-per-turn records of
// daemons before it.
func TestProcSlotsKillStale(t *testing.T) {
	home := t.TempDir()
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	d := &Daemon{paths: config.Paths{Home: home}, log: slog.New(slog.DiscardHandler)}
	r := &runner{d: d, groups: map[int]string{}, procs: newProcSlots(filepath.Join(home, "procs"))}
	live, ended, old := start(), start(), start()
	r.RecordProc("w#thread-1", 1, live.Process.Pid)
	r.RecordProc("w#thread-2", 1, ended.Process.Pid)
	r.ForgetProc("w#thread-2", 1)
	r.RecordProc("w#thread-4", 2, ended.Process.Pid) // reuses the blanked slot
	r.ForgetProc("w#thread-4", 2)
	data, err := os.ReadFile(filepath.Join(home, "procs", procSlotsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 2*procSlotSize || strings.TrimSpace(string(data[procSlotSize:])) != "" ||
		!strings.HasSuffix(strings.TrimSpace(string(data[:procSlotSize])), " w#thread-1-1") {
		t.Fatalf("slots file:\n%q", data)
	}
	// A torn line and an old-style record beside the slots.
	f, _ := os.OpenFile(filepath.Join(home, "procs", procSlotsName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("12")
	f.Close()
	oldStart, _ := procStartTime(old.Process.Pid)
	os.WriteFile(filepath.Join(home, "procs", "w#thread-9-1"), []byte(strings.Join([]string{strconv.Itoa(old.Process.Pid), oldStart}, " ")+"\n"), 0o600)
	r.procs.close()

	next := &runner{d: d, groups: map[int]string{}, procs: newProcSlots(filepath.Join(home, "procs"))}
	next.killStaleProcs()
	for name, cmd := range map[string]*exec.Cmd{"recorded": live, "old-style": old} {
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("the %s adapter still runs", name)
		}
	}
	if err := syscall.Kill(ended.Process.Pid, 0); err != nil {
		t.Fatalf("an adapter whose turn ended was killed: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "procs")); len(entries) != 0 {
		t.Fatalf("records left: %v", entries)
	}
}

// A record's start is the boot clock just after the fork: it matches the
// kernel's start of that process, never one that started after it or
// long before (a recycled pid).
func TestRecordedStartMatchesTheProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	rec, err := bootTicks()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := procStartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !sameStart(cur, strconv.FormatInt(rec, 10)) {
		t.Fatalf("/proc says %s, the boot clock after the fork %d", cur, rec)
	}
	c, _ := strconv.ParseInt(cur, 10, 64)
	for _, other := range []int64{c - 1, c + startSlack + 1, -5} {
		if sameStart(cur, strconv.FormatInt(other, 10)) {
			t.Errorf("a process started at %d matched a record of %d", c, other)
		}
	}
	if !sameStart(cur, cur) || sameStart(cur, "garbage") {
		t.Error("an exact record (an earlier daemon's) must match, a malformed one not")
	}
}
