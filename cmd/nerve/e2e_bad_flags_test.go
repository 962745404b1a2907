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

// A --db that names no database is a typo: no command but serve makes one,
// and a read-only one makes nothing even at the default path.
func TestE2EKhalaDBMustExist(t *testing.T) {
	e := newEnv(t)
	typo := filepath.Join(e.home, "typo.db")
	deep := filepath.Join(e.home, "typo", "dir", "x.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"khala", "user", "list", "--db", typo}, "--db " + typo + " does not exist\nhint: check --db: 'nerve khala serve' creates its database, by default " + filepath.Join(e.home, "khala.db")},
		{[]string{"khala", "user", "add", "alice", "--db", typo}, "does not exist"},
		{[]string{"khala", "user", "remove", "alice", "--db", typo}, "does not exist"},
		{[]string{"khala", "enroll-token", "--db", deep}, "--db " + deep + " does not exist"},
		{[]string{"khala", "user", "list"}, "no Khala database at " + filepath.Join(e.home, "khala.db")},
		{[]string{"khala", "serve", "--db", e.home}, "--db " + e.home + " is a directory; want a database file path"},
		{[]string{"khala", "enroll-token", "--db", e.home}, "is a directory"},
	} {
		r := e.must(2, tc.args...)
		if !strings.HasPrefix(r.stderr, "nerve: ") || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 2 {
			t.Errorf("%s: want %q in one line and a hint:\n%s", strings.Join(tc.args, " "), tc.want, r.stderr)
		}
	}
	for _, made := range []string{typo, filepath.Join(e.home, "typo"), filepath.Join(e.home, "khala.db")} {
		if _, err := os.Stat(made); !os.IsNotExist(err) {
			t.Errorf("a refused command made %s: %v", made, err)
		}
	}
	// The default file is still made by issuing before the first serve:
	// that is the file the server will serve, so the token is good.
	e.must(0, "khala", "enroll-token")
	e.must(0, "khala", "user", "list")
	e.must(0, "khala", "user", "add", "alice", "--db", filepath.Join(e.home, "khala.db"))
}

// A --webhook-allow that is no CIDR, IP or host name is refused before the
// server starts. (That the flag reaches the server: the webhook e2e tests
// deliver to 127.0.0.1 only through it, TestE2EMCPRemoteTurnNotify.)
func TestE2EKhalaWebhookAllowBad(t *testing.T) {
	e := newEnv(t)
	r := e.must(2, "khala", "serve", "--addr", "127.0.0.1:0", "--webhook-allow", "127.0.0.1", "--webhook-allow", "not a host!")
	if !strings.HasPrefix(r.stderr, `nerve: --webhook-allow "not a host!": want a CIDR`) || !strings.Contains(r.stderr, "\nhint: e.g. --webhook-allow 127.0.0.1") {
		t.Fatalf("want one line naming the entry and a hint:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(e.home, "khala.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused serve made the Khala database: %v", err)
	}
}
