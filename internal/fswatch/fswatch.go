package fswatch

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher watches directories. Files are watched through their directory,
// so one that does not exist yet, or is replaced by a rename, is seen.
type Watcher struct {
	// Settle is how long the changed paths must be quiet before they are
	// reported; zero means 100 ms.
	Settle time.Duration
	// Keep, when set, reports whether a changed path matters; others are
	// dropped before they start or extend a batch.
	Keep func(path string) bool
	// OnError, when set, is told of the errors fsnotify reports while
	// watching (an overflowed event queue, say); watching goes on.
	OnError func(error)

	w *fsnotify.Watcher
}

// New starts watching dirs. The error names the directory that could not
// be watched; a caller may fall back to polling.
func New(dirs ...string) (*Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("start a file watcher: %w", err)
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
	}
	return &Watcher{w: w}, nil
}

// Close stops watching; Run returns.
func (w *Watcher) Close() error { return w.w.Close() }

// Run calls changed with the paths (cleaned, sorted) that had events in
// each burst, once they have been quiet for Settle. It returns when ctx is
// done or the watcher is closed.
func (w *Watcher) Run(ctx context.Context, changed func(paths []string)) {
	settle := w.Settle
	if settle <= 0 {
		settle = 100 * time.Millisecond
	}
	pending := map[string]bool{}
	timer := time.NewTimer(settle)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			name := filepath.Clean(ev.Name)
			if w.Keep != nil && !w.Keep(name) {
				continue
			}
			pending[name] = true
			timer.Reset(settle)
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			if err != nil && w.OnError != nil {
				w.OnError(err)
			}
		case <-timer.C:
			paths := make([]string, 0, len(pending))
			for p := range pending {
				paths = append(paths, p)
			}
			slices.Sort(paths)
			clear(pending)
			changed(paths)
		}
	}
}
