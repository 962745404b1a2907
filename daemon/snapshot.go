package daemon

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/nerve-agents/nerve/workflow"
)

// snapshots keeps one JSONL file per running thread holding its messages,
// for `nerve thread messages` inside a turn: an agent's sandbox may block
// the socket and the network, but it can read a file. The file only grows
// (messages never change), so each turn appends what is new instead of
// rewriting the history.
type snapshots struct {
	dir string

	mu      sync.Mutex
	written map[string]int // thread -> messages in its file
	buf     *bufio.Writer  // reused by every Update (under mu)
}

func newSnapshots(dir string) *snapshots {
	return &snapshots{dir: dir, written: map[string]int{}}
}

// path is thread's file: a remote thread's key is its ref, whose "/" and
// "#" are escaped to keep it one file name.
func (s *snapshots) path(thread string) string {
	return filepath.Join(s.dir, url.PathEscape(thread)+".jsonl")
}

// Update makes thread's file hold at least msgs and returns its path.
func (s *snapshots) Update(thread string, msgs []workflow.Message) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.path(thread)
	n, known := s.written[thread]
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !known || n > len(msgs) {
		// First turn since start (or a restart): write it whole.
		flags, n = os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return "", err
		}
	}
	if known && n == len(msgs) {
		return path, nil
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return "", err
	}
	if s.buf == nil {
		s.buf = bufio.NewWriter(nil)
	}
	w := s.buf
	w.Reset(f)
	defer w.Reset(nil) // holds no file between turns
	enc := json.NewEncoder(w)
	for _, m := range msgs[n:] {
		if err := enc.Encode(m); err != nil {
			f.Close()
			delete(s.written, thread)
			return "", err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		delete(s.written, thread)
		return "", err
	}
	if err := f.Close(); err != nil {
		delete(s.written, thread)
		return "", err
	}
	s.written[thread] = len(msgs)
	return path, nil
}

// remove deletes a thread's file once it has ended.
func (s *snapshots) remove(thread string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, thread)
	_ = os.Remove(s.path(thread))
}
