package daemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// procSlots is the record of running adapters: one file of fixed-size
// lines, a running turn's line written over a free one with one pwrite(2)
// and blanked the same way when it ends. A turn costs two small writes to
// an open file, not a file created and removed: on a busy disk that was
// the most a turn spent on anything but its commit and its process.
//
// A pwrite of one line is whole or absent after the daemon is killed, as
// a rename would be; lines are not fsynced, since a reboot ends the
// processes anyway.
type procSlots struct {
	path string

	mu     sync.Mutex
	f      *os.File
	closed bool
	used   map[string]int64 // key → slot
	free   []int64
	next   int64
}

// procSlotSize holds "PID START KEY" padded with spaces, and a newline.
const procSlotSize = 128

// procSlotsName is the file's name in $NERVE_HOME/procs.
const procSlotsName = "slots"

func newProcSlots(dir string) *procSlots {
	return &procSlots{path: filepath.Join(dir, procSlotsName), used: map[string]int64{}}
}

// record writes key's line; a failure leaves the turn unrecorded, as a
// full disk would have.
func (s *procSlots) record(key string, pid int, start string) {
	line := []byte(fmt.Sprintf("%d %s %s", pid, start, key))
	if len(line) > procSlotSize-1 {
		line = line[:procSlotSize-1] // the key is for the log only
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.f == nil {
		_ = os.MkdirAll(filepath.Dir(s.path), 0o700)
		f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return
		}
		s.f = f
	}
	slot, ok := s.used[key]
	if !ok {
		if n := len(s.free); n > 0 {
			slot, s.free = s.free[n-1], s.free[:n-1]
		} else {
			slot = s.next
			s.next++
		}
	}
	if _, err := s.f.WriteAt(padSlot(line), slot*procSlotSize); err != nil {
		s.free = append(s.free, slot)
		return
	}
	s.used[key] = slot
}

// forget blanks key's line.
func (s *procSlots) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.used[key]
	if !ok {
		return
	}
	delete(s.used, key)
	s.free = append(s.free, slot)
	_, _ = s.f.WriteAt(padSlot(nil), slot*procSlotSize)
}

func (s *procSlots) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.f != nil {
		s.f.Close()
	}
}

func padSlot(line []byte) []byte {
	b := bytes.Repeat([]byte{' '}, procSlotSize)
	copy(b, line)
	b[procSlotSize-1] = '\n'
	return b
}
