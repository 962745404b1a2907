package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A negative duration is refused before the command does anything: daemon
// stop would ask the daemon to stop and then report it still running, and
// khala serve would start with it.
func TestE2ENegativeDurations(t *testing.T) {
	e := newEnv(t)
	e.must(0, "daemon", "start")
	pid := e.daemonPID()
	for _, args := range [][]string{
		{"daemon", "stop", "--timeout", "-1s"},
		{"khala", "serve", "--addr", "127.0.0.1:0", "--grace", "-1s"},
		{"khala", "serve", "--addr", "127.0.0.1:0", "--max-wait", "-1s"},
		{"khala", "enroll-token", "--ttl", "-1h"},
		{"inbox", "--timeout", "-2s"},
	} {
		r := e.must(2, args...)
		flag := args[len(args)-2]
		if !strings.HasPrefix(r.stderr, "nerve: "+flag+" -") || !strings.Contains(r.stderr, "a duration cannot be negative\nhint: "+flag+": ") {
			t.Errorf("%s: want one line naming %s and a hint:\n%s", strings.Join(args, " "), flag, r.stderr)
		}
	}
	if st := e.must(0, "daemon", "status", "--json"); e.daemonPID() != pid || !strings.Contains(st.stdout, `"pid":`) {
		t.Fatalf("the daemon did not outlive a refused stop: %s", st)
	}
	if _, err := os.Stat(filepath.Join(e.home, "khala.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused command made the Khala database: %v", err)
	}
}
