package sense

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/nerve-agents/nerve/reflex"
)

// settle is how long a path must be quiet before its change is signalled:
// editors and tools write a file in several steps.
const settle = 200 * time.Millisecond

// File emits a signal when a watched path (a file, or anything in a
// directory) is created, written, renamed or removed.
type File struct {
	name  string
	paths []string
	state atomic.Value
}

// NewFile returns a file sense over paths.
func NewFile(name string, paths []string) *File {
	f := &File{name: name, paths: paths}
	f.state.Store("starting")
	return f
}

func (s *File) Name() string  { return s.name }
func (s *File) Kind() string  { return "file" }
func (s *File) State() string { return s.state.Load().(string) }

// Run watches until ctx is done. A file is watched through its directory,
// so a file that does not exist yet, or is replaced by rename, is seen.
func (s *File) Run(ctx context.Context, emit func(reflex.Signal)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.state.Store("unavailable")
		return fmt.Errorf("sense %s: %w", s.name, err)
	}
	defer w.Close()
	files := map[string]bool{} // watched through their directory
	for _, p := range s.paths {
		p = filepath.Clean(p)
		fi, err := os.Stat(p)
		if err == nil && fi.IsDir() {
			err = w.Add(p)
		} else {
			files[p] = true
			err = w.Add(filepath.Dir(p))
		}
		if err != nil {
			s.state.Store("unavailable")
			return fmt.Errorf("sense %s: watch %s: %w", s.name, p, err)
		}
	}
	s.state.Store("watching")
	pending := map[string]bool{}
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Clean(ev.Name)
			if len(files) > 0 && !files[name] && !s.inWatchedDir(name, files) {
				continue
			}
			pending[name] = true
			timer = time.After(settle)
		case err := <-w.Errors:
			if err != nil {
				s.state.Store("error: " + err.Error())
			}
		case <-timer:
			timer = nil
			for p := range pending {
				emit(reflex.Signal{Sense: s.name, At: time.Now().UTC(), Path: p})
			}
			pending = map[string]bool{}
		}
	}
}

// inWatchedDir reports whether name is inside a directory given as a
// path (not one watched only for a file of it).
func (s *File) inWatchedDir(name string, files map[string]bool) bool {
	dir := filepath.Dir(name)
	for _, p := range s.paths {
		if filepath.Clean(p) == dir && !files[filepath.Clean(p)] {
			return true
		}
	}
	return false
}
