package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// testLog is a daemon's logger in a test: lines go to t.Log (until the
// test ends), and a test can wait for a message to be logged, an event
// it can observe instead of sleeping until it has probably happened.
type testLog struct {
	t     testing.TB
	mu    sync.Mutex
	done  bool
	seen  map[string]bool
	waits map[string]chan struct{}
}

func newTestLog(t testing.TB) (*slog.Logger, *testLog) {
	l := &testLog{t: t, seen: map[string]bool{}, waits: map[string]chan struct{}{}}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return slog.New(l), l
}

// logged returns a channel closed once msg has been logged.
func (l *testLog) logged(msg string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.waits[msg]
	if !ok {
		ch = make(chan struct{})
		l.waits[msg] = ch
		if l.seen[msg] {
			close(ch)
		}
	}
	return ch
}

func (l *testLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *testLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(b.String())
	}
	if !l.seen[r.Message] {
		l.seen[r.Message] = true
		if ch, ok := l.waits[r.Message]; ok {
			close(ch)
		}
	}
	return nil
}

func (l *testLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *testLog) WithGroup(string) slog.Handler      { return l }
