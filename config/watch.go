package config

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch calls onChange after file's content changes (created, written,
// renamed into place, removed), debounced. It watches the directory, since
// editors save by rename, and falls back to polling when fsnotify cannot
// start. It returns when ctx is done.
func Watch(ctx context.Context, file string, onChange func()) error {
	last, _ := os.ReadFile(file)
	check := func() {
		cur, _ := os.ReadFile(file)
		if !bytes.Equal(cur, last) {
			last = cur
			onChange()
		}
	}
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(filepath.Dir(file))
	}
	if err != nil {
		if w != nil {
			w.Close()
		}
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				check()
			}
		}
	}
	defer w.Close()
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Clean(ev.Name) == filepath.Clean(file) {
				debounce = time.After(100 * time.Millisecond)
			}
		case <-w.Errors:
		case <-debounce:
			debounce = nil
			check()
		}
	}
}
