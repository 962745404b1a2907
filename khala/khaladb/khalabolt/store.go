package khalabolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	bolt "go.etcd.io/bbolt"
)

var (
	bMeta      = []byte("meta")
	bEnroll    = []byte("enroll")    // token hash -> EnrollToken
	bAgents    = []byte("agents")    // name -> Agent
	bTokens    = []byte("tokens")    // token hash -> agent name
	bWorkflows = []byte("workflows") // name -> WorkflowRecord
	bSources   = []byte("sources")   // content hash -> definition source
	bThreads   = []byte("threads")   // N, region, ... -> a thread's records (threadKey, turnKey, ...)
	bList      = []byte("list")      // N -> nil: every thread, for listing
	bIndex     = []byte("index")     // prefix, ... -> the queue, leases, idle deadlines, running threads
	bHooks     = []byte("hooks")     // id -> Webhook
	bHookDue   = []byte("hookdue")   // next attempt, id -> nil
	bPeople    = []byte("people")    // name -> Person
	bPersonTok = []byte("persontok") // token hash -> person name

	kNextThread = []byte("next_thread")
	kNextHook   = []byte("next_hook")
	kFormat     = []byte("format")

	allBuckets = [][]byte{bMeta, bEnroll, bAgents, bTokens, bWorkflows, bSources, bThreads, bList, bIndex, bHooks, bHookDue, bPeople, bPersonTok, bUsage, bSeen}
)

// A thread's records share one key range (N first), and within it a
// step's turn and events sit together; the indexes share one bucket. A
// claim then dirties one leaf of the file and an answer two or three,
// not one per bucket: a commit is mostly its two fsyncs.
const (
	regionThread   byte = 0 // N, 0 -> Thread
	regionSteps    byte = 1 // N, 1, step, 0 -> Turn; N, 1, step, seq -> Event (step 0: the thread's own)
	regionMessages byte = 2 // N, 2, step -> Message

	ixChild   byte = 'c' // 'c', next check, N, step -> nil: child turns
	ixIdle    byte = 'i' // 'i', deadline, N, step -> nil
	ixLease   byte = 'l' // 'l', expiry, N, step -> claim
	ixQueue   byte = 'q' // 'q', priority, first queued, N, step -> workflow \0 role (priority.go)
	ixRunning byte = 'r' // 'r', N -> nil
	ixWaiting byte = 'w' // 'w', first queued, N, step -> nil: human turns
)

// storeFormat is the layout of the records below and in codec.go; 2
// added priorities to the queue's keys (a format 1 file is converted at
// open).
const storeFormat = 2

// Store is the embedded Storage: one bbolt file, one process.
type Store struct {
	db    *bolt.DB
	hints *khaladb.Hints
	w     writer

	// threadLocks serialise UpdateThread per thread (striped), so its
	// optimistic check fails only against claims and heartbeats.
	threadLocks [256]sync.Mutex

	msgs   shared.Messages
	seqs   seqCache
	agents shared.Agents
	events eventIndex
	// lastThread is the last thread number handed out. Only created
	// threads move the stored counter (in their own commit): a number
	// handed out for a thread that was never created was never seen, so
	// after a restart it may be handed out again.
	lastThread atomic.Uint64
}

// Open opens (creating) the bbolt file at path, waiting at most
// timeout for another process's lock (ErrLocked).
func Open(path string, timeout time.Duration) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: timeout,
		// The freelist is rebuilt at open instead of written per commit:
		// less I/O per commit, same durability.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, khaladb.ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		fillUsage := tx.Bucket(bUsage) == nil && tx.Bucket(bThreads) != nil
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		// The record layout, so a future one can refuse (or convert) a file
		// it does not know instead of misreading it.
		meta := tx.Bucket(bMeta)
		switch v := meta.Get(kFormat); {
		case v == nil:
			return meta.Put(kFormat, []byte{storeFormat})
		case len(v) == 1 && v[0] == 1:
			if err := upgradeQueue(tx); err != nil {
				return err
			}
			if err := meta.Put(kFormat, []byte{storeFormat}); err != nil {
				return err
			}
		case len(v) != 1 || v[0] != storeFormat:
			return fmt.Errorf("%w: record format %x, this nerve reads format %d", errBadRecord, v, storeFormat)
		}
		if fillUsage {
			return fillUsageRollup(tx)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	b := &Store{db: db, hints: khaladb.NewHints(), w: writer{db: db},
		seqs: seqCache{m: map[uint64]uint64{}}}
	err = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(kNextThread); v != nil {
			b.lastThread.Store(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	return b, nil
}

// Close finishes the writes already asked for, then closes the file.
func (b *Store) Close() error {
	if !b.w.close() {
		return nil
	}
	return b.db.Close()
}

// Ping implements Storage: an open file is always reachable.
func (b *Store) Ping(ctx context.Context) error {
	if b.w.isClosed() {
		return khaladb.ErrClosed
	}
	return nil
}

// Changed implements Storage.
func (b *Store) Changed(topic string) <-chan struct{} { return b.hints.Wait(topic) }

// update runs fn in a write transaction, batched with others' (see
// writer). fn must report business outcomes through its closure and
// return an error only when the transaction itself fails: it may run
// again, alone, if another request in its batch fails.
func (b *Store) update(fn func(tx *bolt.Tx) error) error { return b.w.update(fn) }

func (b *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.View(fn)
}

func (b *Store) lockThread(id string) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &b.threadLocks[h.Sum32()%uint32(len(b.threadLocks))]
	m.Lock()
	return m.Unlock
}

// Keys. Numbers are big-endian so bbolt's byte order is numeric order.

func k8(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func threadKey(n uint64) []byte { return append(k8(n), regionThread) }

func stepKey(n uint64, step int, seq uint64) []byte {
	k := binary.BigEndian.AppendUint32(append(k8(n), regionSteps), uint32(step))
	return binary.BigEndian.AppendUint64(k, seq)
}

func turnKey(n uint64, step int) []byte { return stepKey(n, step, 0) }

func msgKey(n uint64, step int) []byte {
	return binary.BigEndian.AppendUint32(append(k8(n), regionMessages), uint32(step))
}

// ixKey is an index entry for turn step of thread n at time t.
func ixKey(prefix byte, t time.Time, n uint64, step int) []byte {
	k := binary.BigEndian.AppendUint64([]byte{prefix}, uint64(max(t.UnixNano(), 0)))
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(k, n), uint32(step))
}

// ixParse splits an ixKey.
func ixParse(k []byte) (t time.Time, n uint64, step int) {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))), binary.BigEndian.Uint64(k[9:17]), int(binary.BigEndian.Uint32(k[17:21]))
}

func runningKey(n uint64) []byte { return append([]byte{ixRunning}, k8(n)...) }

// timeKey prefixes key with t, for the webhook schedule.
func timeKey(t time.Time, key []byte) []byte {
	return append(k8(uint64(max(t.UnixNano(), 0))), key...)
}

func keyTime(k []byte) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))) }

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	return true, json.Unmarshal(data, v)
}

// nextCounter increments a meta counter and returns its new value.
func nextCounter(tx *bolt.Tx, key []byte) (uint64, error) {
	meta := tx.Bucket(bMeta)
	n := uint64(1)
	if v := meta.Get(key); v != nil {
		n = binary.BigEndian.Uint64(v) + 1
	}
	return n, meta.Put(key, k8(n))
}
