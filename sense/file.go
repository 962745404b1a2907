package sense

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/internal/fswatch"

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
	files := map[string]bool{} // watched through their directory
	var dirs []string
	for _, p := range s.paths {
		p = filepath.Clean(p)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		} else {
			files[p] = true
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	w, err := fswatch.New(dirs...)
	if err != nil {
		s.state.Store("unavailable")
		return fmt.Errorf("sense %s: %w", s.name, err)
	}
	defer w.Close()
	w.Settle = settle
	w.Keep = func(name string) bool {
		return len(files) == 0 || files[name] || s.inWatchedDir(name, files)
	}
	w.OnError = func(err error) { s.state.Store("error: " + err.Error()) }
	s.state.Store("watching")
	w.Run(ctx, func(paths []string) {
		for _, p := range paths {
			emit(reflex.Signal{Sense: s.name, At: time.Now().UTC(), Path: p})
		}
	})
	return nil
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
