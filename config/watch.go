package config

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/nerve-agents/nerve/internal/fswatch"
)

// Watch calls onChange after file's content changes (created, written,
// renamed into place, removed), debounced. It watches the directory, since
// editors save by rename, and falls back to polling when fsnotify cannot
// start. It returns when ctx is done.
func Watch(ctx context.Context, file string, onChange func()) error {
	NewWatcher(file).Run(ctx, onChange)
	return nil
}

// Watcher is Watch in two halves: NewWatcher notes the file's content and
// starts watching at once, so a change made right after it returns is
// seen; Run reports changes until ctx is done.
type Watcher struct {
	file string
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

// Run calls onChange after each change of the file's content, until ctx
// is done; then it stops watching.
func (w *Watcher) Run(ctx context.Context, onChange func()) {
	check := func() {
		cur, _ := os.ReadFile(w.file)
		if !bytes.Equal(cur, w.last) {
			w.last = cur
			onChange()
		}
	}
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
