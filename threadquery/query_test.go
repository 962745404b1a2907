package threadquery

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

func TestResolve(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	turn := Turn{Thread: "w#thread-1"}
	for _, c := range []struct {
		q    Query
		turn Turn
		ref  string
		f    workflow.Filter
		err  string
	}{
		{q: Query{}, turn: turn, ref: "w#thread-1"},
		{q: Query{Ref: "o/x#thread-2", Last: 3, Role: "r", Step: 2}, ref: "o/x#thread-2", f: workflow.Filter{Role: "r", Last: 3, Step: 2}},
		{q: Query{Since: "10m"}, turn: turn, ref: "w#thread-1", f: workflow.Filter{Since: now.Add(-10 * time.Minute)}},
		{q: Query{Since: "2026-11-25T10:00:00Z"}, turn: turn, ref: "w#thread-1", f: workflow.Filter{Since: now.Add(-2 * time.Hour)}},
		{q: Query{}, err: "no thread given and NERVE_THREAD is not set"},
		{q: Query{Last: -1}, turn: turn, err: "last and step take positive numbers"},
		{q: Query{Step: -1, Flags: true}, turn: turn, err: "--last and --step take positive numbers"},
		{q: Query{Since: "yesterday"}, turn: turn, err: `since "yesterday" is neither a duration nor an RFC 3339 time`},
		{q: Query{Since: "yesterday", Flags: true}, turn: turn, err: `--since "yesterday"`},
		{q: Query{Since: "-5m", Flags: true}, turn: turn, err: `--since "-5m": a duration ago cannot be negative`},
	} {
		ref, f, err := c.q.Resolve(c.turn, now)
		if c.err != "" {
			var ue *UsageError
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &ue) || ue.ExitCode() != 2 {
				t.Errorf("%+v: error %v, want a usage error with %q", c.q, err, c.err)
			}
			continue
		}
		if err != nil || ref != c.ref || f.Role != c.f.Role || f.Last != c.f.Last || f.Step != c.f.Step || !f.Since.Equal(c.f.Since) {
			t.Errorf("%+v: %s %+v %v, want %s %+v", c.q, ref, f, err, c.ref, c.f)
		}
	}
}

// Inside a turn the turn's thread is answered from its snapshot, with no
// daemon or remote asked; another thread is not.
func TestMessagesFromTheSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap.jsonl")
	var lines []string
	for i, role := range []string{"author", "reviewer", "author"} {
		b, _ := json.Marshal(workflow.Message{Step: i + 1, Role: role, Content: role})
		lines = append(lines, string(b))
	}
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	turn := Turn{Thread: "w#thread-1", Snapshot: path}
	ref, msgs, err := Messages(context.Background(), Query{Role: "author", Last: 1}, turn, nil)
	if err != nil || ref != "w#thread-1" || len(msgs) != 1 || msgs[0].Step != 3 {
		t.Fatalf("from the snapshot: %s %+v %v", ref, msgs, err)
	}
	asked := false
	fetch := func(_ context.Context, ref workflow.Ref, _ workflow.Filter) ([]workflow.Message, error) {
		asked = true
		return nil, errors.New("no remote " + ref.Remote)
	}
	if _, _, err := Messages(context.Background(), Query{Ref: "o/w#thread-1"}, turn, fetch); err == nil || !asked {
		t.Fatalf("another thread must be fetched: %v", err)
	}
	if _, _, err := Messages(context.Background(), Query{}, Turn{Thread: "w#thread-1", Snapshot: path + ".gone"}, nil); err == nil || !strings.Contains(err.Error(), "read thread snapshot") {
		t.Fatalf("a missing snapshot: %v", err)
	}
}

// With --last alone only the tail is decoded: a line before it that does
// not parse is not read; any other filter reads (and checks) every line.
func TestSnapshotTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w--thread-1.jsonl")
	var b strings.Builder
	b.WriteString("not json\n")
	for i := 1; i <= 5; i++ {
		line, _ := json.Marshal(workflow.Message{Step: i, Role: []string{"a", "b"}[i%2], Content: "m"})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	turn := Turn{Thread: "w#thread-1", Snapshot: path}
	_, msgs, err := Messages(context.Background(), Query{Last: 2}, turn, nil)
	if err != nil || len(msgs) != 2 || msgs[0].Step != 4 || msgs[1].Step != 5 {
		t.Fatalf("--last 2: %+v %v", msgs, err)
	}
	if _, _, err := Messages(context.Background(), Query{Last: 2, Role: "b"}, turn, nil); err == nil || !strings.Contains(err.Error(), "thread snapshot") {
		t.Fatalf("--role reads every line and finds the bad one: %v", err)
	}
	os.WriteFile(path, nil, 0o600)
	if _, msgs, err := Messages(context.Background(), Query{Last: 3}, turn, nil); err != nil || len(msgs) != 0 {
		t.Fatalf("empty snapshot: %+v %v", msgs, err)
	}
}
