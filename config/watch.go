package config

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/fswatch"
)

// Watcher reports changes of nerve.yaml's content (created, written,
// renamed into place, removed). NewWatcher notes the file's content and
// starts watching at once, so a change made right after it returns is
// seen; Run reports changes, debounced, until ctx is done; Check reports
// one at once. It watches the directory, since editors save by rename,
// and falls back to polling when fsnotify cannot start.
type Watcher struct {
	file string
	// mu is held while onChange runs, so a Check that comes during a
	// reload returns only after it.
	mu   sync.Mutex
	last []byte
	fs   *fswatch.Watcher // nil: poll
}

// NewWatcher starts watching file.
func NewWatcher(file string) *Watcher {
	w := &Watcher{file: filepath.Clean(file)}
	w.last, _ = os.ReadFile(file)
	if fw, err := fswatch.New(filepath.Dir(file)); err == nil {
		fw.Keep = func(p string) bool { return p == w.file }
		w.fs = fw
	}
	return w
}

// Check calls onChange, before it returns, when the file's content is not
// what the watcher last saw, and waits for one another caller runs. The
// daemon checks before it answers a request: a command run right after an
// edit of nerve.yaml sees the edit, though the watcher's debounce (or its
// polling) has not reported it yet.
func (w *Watcher) Check(onChange func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, _ := os.ReadFile(w.file)
	if !bytes.Equal(cur, w.last) {
		w.last = cur
		onChange()
	}
}

// Run calls onChange after each change of the file's content, until ctx
// is done; then it stops watching.
func (w *Watcher) Run(ctx context.Context, onChange func()) {
	check := func() { w.Check(onChange) }
	if w.fs == nil {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				check()
			}
		}
	}
	defer w.fs.Close()
	w.fs.Run(ctx, func([]string) { check() })
}
