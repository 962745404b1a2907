package store

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

var (
	bucketThreads  = []byte("threads")
	bucketMessages = []byte("messages") // one sub-bucket per thread, keyed by step
	bucketEvents   = []byte("events")   // one sub-bucket per thread, keyed by sequence
	bucketMeta     = []byte("meta")
	keyNextThread  = []byte("next_thread")
)

// ErrLocked means another process (another daemon) holds nerve.db.
var ErrLocked = errors.New("nerve.db is locked by another process")

// ErrNotFound is an unknown thread.
var ErrNotFound = errors.New("not found")

// Store is nerve.db.
type Store struct {
	db *bolt.DB

	mu        sync.Mutex
	waiters   map[string]chan struct{}
	delivered map[uint64]bool // outbox items delivered, not yet deleted
}

// Open opens (creating) the database at path, waiting at most timeout for
// another process's lock.
func Open(path string, timeout time.Duration) (*Store, error) {
	// The freelist is rebuilt on open rather than written on every commit:
	// fewer pages per fsync, and a thread commits once per turn.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketThreads, bucketMessages, bucketEvents, bucketMeta, bucketAnswers, bucketChildren, bucketSpend, bucketChildSpend} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	st := &Store{db: db, waiters: map[string]chan struct{}{}, delivered: map[uint64]bool{}}
	if err == nil {
		err = st.ensureRemoteBuckets()
	}
	if err == nil {
		err = st.ensureUsage()
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	return st, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// CreateThread assigns t the next thread id and stores it with its
// thread.started event, in one transaction.
func (s *Store) CreateThread(t *workflow.Thread) error {
	return s.CreateThreadWith(t, nil)
}

// CreateThreadWith is CreateThread with prepare run once t has its id and
// before it is stored (a thread's workspace branch is named after the
// id): an error from prepare stores nothing and gives the id back.
// prepare runs inside the write transaction, so it must be quick.
func (s *Store) CreateThreadWith(t *workflow.Thread, prepare func(*workflow.Thread) error) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		n := uint64(1)
		if v := meta.Get(keyNextThread); v != nil {
			n = binary.BigEndian.Uint64(v)
		}
		if err := meta.Put(keyNextThread, u64(n+1)); err != nil {
			return err
		}
		t.ID = "thread-" + strconv.FormatUint(n, 10)
		if prepare != nil {
			if err := prepare(t); err != nil {
				t.ID = ""
				return err
			}
		}
		if err := indexChild(tx, t); err != nil {
			return err
		}
		_, err := commitTx(tx, workflow.Update{Thread: t, Events: []workflow.Event{{
			Type: workflow.EventThreadStarted, Thread: t.ID, Status: t.Status, At: t.CreatedAt,
		}}})
		return err
	})
	if err == nil {
		s.wake(t.ID)
		if t.Parent != nil {
			s.wake(t.Parent.Thread)
		}
	}
	return err
}

// Commit writes one transition of a thread durably. It counts in
// u.Thread's totals what its agent-started children that ended since its
// last commit spent (see ChildSpend).
func (s *Store) Commit(u workflow.Update) error {
	var late usage.Totals
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		late, err = commitTx(tx, u)
		return err
	})
	if err == nil {
		u.Thread.Usage.Merge(late)
		s.wake(u.Thread.ID)
	}
	return err
}

// AppendEvents records events of a thread (detections, resumes).
func (s *Store) AppendEvents(thread string, evs ...workflow.Event) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return putEvents(tx, thread, evs)
	})
	if err == nil {
		s.wake(thread)
	}
	return err
}

// commitTx writes u, and returns what it counted in u.Thread's totals
// beyond what u.Thread says: its agent-started children's spend, for
// Commit to add once the transaction is on disk.
func commitTx(tx *bolt.Tx, u workflow.Update) (usage.Totals, error) {
	t := u.Thread
	if err := spendUp(tx, t); err != nil {
		return usage.Totals{}, err
	}
	late, ok, err := takeChildSpend(tx, t)
	if err != nil {
		return late, err
	}
	if ok {
		counted := *t
		counted.Usage.Merge(late)
		t = &counted
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return late, err
	}
	if err := tx.Bucket(bucketThreads).Put([]byte(t.ID), raw); err != nil {
		return late, err
	}
	if err := putMessages(tx, t, u.Messages); err != nil {
		return late, err
	}
	return late, putEvents(tx, t.ID, u.Events)
}

// putMessages stores a thread's new (or stored again) messages, counting
// each new one in the usage rollup and the day's spend.
func putMessages(tx *bolt.Tx, t *workflow.Thread, msgs []workflow.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	mb, err := tx.Bucket(bucketMessages).CreateBucketIfNotExists([]byte(t.ID))
	if err != nil {
		return err
	}
	if err := chargeNew(tx, mb, msgs); err != nil {
		return err
	}
	ub := tx.Bucket(bucketUsage)
	for _, m := range msgs {
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		key := u64(uint64(m.Step))
		if mb.Get(key) == nil {
			// A message stored again (a merge's verdict) was counted.
			if err := addUsage(ub, t.Workflow, m); err != nil {
				return err
			}
		}
		if err := mb.Put(key, raw); err != nil {
			return err
		}
	}
	return nil
}

func putEvents(tx *bolt.Tx, thread string, evs []workflow.Event) error {
	if len(evs) == 0 {
		return nil
	}
	eb, err := tx.Bucket(bucketEvents).CreateBucketIfNotExists([]byte(thread))
	if err != nil {
		return err
	}
	for _, e := range evs {
		seq, _ := eb.NextSequence()
		e.Seq, e.Thread = seq, thread
		raw, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := eb.Put(u64(seq), raw); err != nil {
			return err
		}
	}
	return nil
}

// Thread returns one thread.
func (s *Store) Thread(id string) (*workflow.Thread, error) {
	var t *workflow.Thread
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketThreads).Get([]byte(id))
		if raw == nil {
			return ErrNotFound
		}
		t = new(workflow.Thread)
		return json.Unmarshal(raw, t)
	})
	return t, err
}

// Threads lists threads, newest first, optionally of one workflow and
// status; limit 0 means all.
func (s *Store) Threads(workflowName, status string, limit int) ([]*workflow.Thread, error) {
	var out []*workflow.Thread
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketThreads).ForEach(func(_, raw []byte) error {
			t := new(workflow.Thread)
			if err := json.Unmarshal(raw, t); err != nil {
				return err
			}
			if (workflowName == "" || t.Workflow == workflowName) && (status == "" || t.Status == status) {
				out = append(out, t)
			}
			return nil
		})
	})
	sortThreads(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// Messages returns a thread's messages in step order.
func (s *Store) Messages(thread string) ([]workflow.Message, error) {
	var out []workflow.Message
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMessages).Bucket([]byte(thread))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, raw []byte) error {
			var m workflow.Message
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			out = append(out, m)
			return nil
		})
	})
	return out, err
}

// Events returns a thread's events with a sequence number above after.
func (s *Store) Events(thread string, after uint64) ([]workflow.Event, error) {
	var out []workflow.Event
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents).Bucket([]byte(thread))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, raw := c.Seek(u64(after + 1)); k != nil; k, raw = c.Next() {
			var e workflow.Event
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// Changed returns a channel closed at the next commit touching thread, so
// followers wait for news instead of polling.
func (s *Store) Changed(thread string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.waiters[thread]
	if !ok {
		ch = make(chan struct{})
		s.waiters[thread] = ch
	}
	return ch
}

func (s *Store) wake(thread string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.waiters[thread]; ok {
		close(ch)
		delete(s.waiters, thread)
	}
}

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// sortChildren orders by step, then by thread number.
func sortChildren(cs []Child) {
	slices.SortStableFunc(cs, func(a, b Child) int {
		if a.Step != b.Step {
			return cmp.Compare(a.Step, b.Step)
		}
		return workflow.CompareThreadIDs(a.ID, b.ID)
	})
}

// sortThreads orders by thread number, newest first.
func sortThreads(ts []*workflow.Thread) {
	slices.SortFunc(ts, func(a, b *workflow.Thread) int { return workflow.CompareThreadIDs(b.ID, a.ID) })
}
