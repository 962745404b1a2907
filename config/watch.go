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
	last, _ := os.ReadFile(file)
	check := func() {
		cur, _ := os.ReadFile(file)
		if !bytes.Equal(cur, last) {
			last = cur
			onChange()
		}
	}
	w, err := fswatch.New(filepath.Dir(file))
	if err != nil {
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
	name := filepath.Clean(file)
	w.Keep = func(p string) bool { return p == name }
	w.Run(ctx, func([]string) { check() })
	return nil
}
