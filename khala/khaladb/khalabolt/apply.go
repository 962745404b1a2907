package khalabolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/workflow"
)

// NextThreadID implements Storage.
// It costs no commit: CreateThread records the number (see lastThread).
func (b *Store) NextThreadID(ctx context.Context) (string, error) {
	if b.w.isClosed() {
		return "", khaladb.ErrClosed
	}
	return khaladb.ThreadID(b.lastThread.Add(1)), nil
}

// encodedChange is a ThreadChange encoded before the write transaction,
// so the writer, which every request waits for, only checks versions and
// copies bytes.
type encodedChange struct {
	c      *khaladb.ThreadChange
	n      uint64
	thread []byte
	bodies [][]byte // per c.Turns
	msgs   [][]byte // per c.Messages
	events [][]byte // per c.Events, numbered in the transaction
}

func encodeChange(n uint64, c *khaladb.ThreadChange) (*encodedChange, error) {
	e := &encodedChange{c: c, n: n}
	var err error
	if e.thread, err = json.Marshal(c.Thread); err != nil {
		return nil, err
	}
	for i := range c.Turns {
		body, err := encodeTurnBody(&c.Turns[i])
		if err != nil {
			return nil, err
		}
		e.bodies = append(e.bodies, body)
	}
	for _, m := range c.Messages {
		data, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		e.msgs = append(e.msgs, data)
	}
	for _, ev := range c.Events {
		data, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		e.events = append(e.events, data)
	}
	return e, nil
}

// CreateThread implements Storage.
func (b *Store) CreateThread(ctx context.Context, c *khaladb.ThreadChange) error {
	n, ok := khaladb.ParseThreadID(c.Thread.ID)
	if !ok {
		return fmt.Errorf("create thread: bad id %q", c.Thread.ID)
	}
	e, err := encodeChange(n, c)
	if err != nil {
		return err
	}
	exists := false
	err = b.update(func(tx *bolt.Tx) error {
		exists = tx.Bucket(bThreads).Get(threadKey(n)) != nil
		if exists {
			return nil
		}
		if err := tx.Bucket(bList).Put(k8(n), nil); err != nil {
			return err
		}
		meta := tx.Bucket(bMeta)
		if v := meta.Get(kNextThread); v == nil || binary.BigEndian.Uint64(v) < n {
			if err := meta.Put(kNextThread, k8(n)); err != nil {
				return err
			}
		}
		// A new thread has no turns on disk, so it cannot be stale.
		_, err := b.apply(tx, e, 0, false)
		return err
	})
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("create thread: %s already exists", c.Thread.ID)
	}
	b.notifyChange(c)
	return nil
}

// UpdateThread implements Storage.
func (b *Store) UpdateThread(ctx context.Context, id string, fn func(*khaladb.ThreadView) (*khaladb.ThreadChange, error)) error {
	n, ok := khaladb.ParseThreadID(id)
	if !ok {
		return khaladb.ErrNotFound
	}
	defer b.lockThread(id)()
	for range 20 {
		v, err := b.Thread(ctx, id)
		if err != nil {
			return err
		}
		c, err := fn(v)
		if err != nil || c == nil {
			return err
		}
		e, err := encodeChange(n, c)
		if err != nil {
			return err
		}
		stale := false
		err = b.update(func(tx *bolt.Tx) error {
			cur, err := threadVersion(tx.Bucket(bThreads).Get(threadKey(n)))
			if err != nil {
				return err
			}
			if stale = cur != v.Thread.Version; stale {
				return nil
			}
			stale, err = b.apply(tx, e, cur, !v.Thread.Ended())
			return err
		})
		if err != nil {
			return err
		}
		if !stale {
			b.notifyChange(c)
			return nil
		}
		// A claim or heartbeat moved a turn fn read: read again.
	}
	return khaladb.ErrConflict
}

// apply writes e over a thread stored at version (0: new), running or
// not. It first checks every turn against the revision it was read with:
// a turn that moved (a claim, a heartbeat) makes the change stale, and
// then nothing is written.
func (b *Store) apply(tx *bolt.Tx, e *encodedChange, version uint64, wasRunning bool) (stale bool, err error) {
	c, n := e.c, e.n
	threads, ix := tx.Bucket(bThreads), tx.Bucket(bIndex)
	olds := make([]*turnHead, len(c.Turns))
	for i := range c.Turns {
		raw := threads.Get(turnKey(n, c.Turns[i].Step))
		if raw == nil {
			if c.Turns[i].Rev != 0 {
				return true, nil
			}
			continue
		}
		h, _, err := splitTurn(raw)
		if err != nil {
			return false, err
		}
		if h.Rev != c.Turns[i].Rev {
			return true, nil
		}
		olds[i] = &h
	}
	if err := threads.Put(threadKey(n), threadValue(version+1, e.thread)); err != nil {
		return false, err
	}
	switch ended := c.Thread.Ended(); {
	case ended && wasRunning:
		err = ix.Delete(runningKey(n))
	case !ended && !wasRunning:
		err = ix.Put(runningKey(n), nil)
	}
	if err != nil {
		return false, err
	}
	if err := reserveChildren(tx, c.Turns); err != nil {
		return false, err
	}
	for i := range c.Turns {
		h := headOf(&c.Turns[i])
		h.Rev++
		if err := putTurn(tx, n, c.Turns[i].Step, olds[i], h, e.bodies[i], queueValue(&c.Turns[i])); err != nil {
			return false, err
		}
	}
	for i, m := range c.Messages {
		if err := threads.Put(msgKey(n, m.Step), e.msgs[i]); err != nil {
			return false, err
		}
	}
	if err := b.appendEvents(tx, n, c.Events, e.events); err != nil {
		return false, err
	}
	if err := addSpent(tx, c.Spent); err != nil {
		return false, err
	}
	for i := range c.Webhooks {
		if err := addWebhook(tx, &c.Webhooks[i]); err != nil {
			return false, err
		}
	}
	return false, nil
}

// reserveChildren moves the stored thread counter past the child threads
// turns name: their ids were handed out before the children exist, and a
// restart must not hand them out again.
func reserveChildren(tx *bolt.Tx, turns []khaladb.Turn) error {
	meta := tx.Bucket(bMeta)
	for i := range turns {
		n, ok := khaladb.ParseThreadID(turns[i].Child)
		if !ok {
			continue
		}
		if v := meta.Get(kNextThread); v == nil || binary.BigEndian.Uint64(v) < n {
			if err := meta.Put(kNextThread, k8(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// putTurn stores a turn and moves its index entries from old's state
// (nil: a new turn) to h's; queued is its queue entry's value, which a
// turn that stays out of the queue does not need.
func putTurn(tx *bolt.Tx, n uint64, step int, old *turnHead, h turnHead, body []byte, queued []byte) error {
	ix := tx.Bucket(bIndex)
	if old != nil {
		for _, k := range turnIndex(n, step, *old) {
			if err := ix.Delete(k); err != nil {
				return err
			}
		}
	}
	for _, k := range turnIndex(n, step, h) {
		v := []byte(nil)
		switch k[0] {
		case ixQueue:
			v = queued
		case ixLease:
			v = []byte(h.Claim)
		}
		if err := ix.Put(k, v); err != nil {
			return err
		}
	}
	return tx.Bucket(bThreads).Put(turnKey(n, step), turnValue(h, body))
}

// turnIndex returns the index keys a turn in h's state has.
func turnIndex(n uint64, step int, h turnHead) [][]byte {
	switch h.State {
	case khaladb.TurnQueued:
		keys := [][]byte{queueKey(h.Priority, h.FirstQueued, n, step)}
		if !h.IdleAt.IsZero() {
			keys = append(keys, ixKey(ixIdle, h.IdleAt, n, step))
		}
		return keys
	case khaladb.TurnClaimed:
		return [][]byte{ixKey(ixLease, h.LeaseExpires, n, step)}
	case khaladb.TurnWaiting:
		keys := [][]byte{ixKey(ixWaiting, h.FirstQueued, n, step)}
		if !h.IdleAt.IsZero() {
			keys = append(keys, ixKey(ixIdle, h.IdleAt, n, step))
		}
		return keys
	case khaladb.TurnChild:
		return [][]byte{ixKey(ixChild, h.LeaseExpires, n, step)}
	}
	return nil
}

// seqCache remembers each thread's last event number, so an append needs
// no scan. It is only touched inside write transactions; one that rolls
// back leaves a gap in the numbers, never a repeat, and a thread not in
// it is read from the file.
type seqCache struct {
	mu sync.Mutex
	m  map[uint64]uint64
}

// appendEvents numbers evs (encoded as data) after the thread's last event
// and stores them beside their steps.
func (b *Store) appendEvents(tx *bolt.Tx, n uint64, evs []workflow.Event, data [][]byte) error {
	if len(evs) == 0 {
		return nil
	}
	threads := tx.Bucket(bThreads)
	b.seqs.mu.Lock()
	defer b.seqs.mu.Unlock()
	seq, ok := b.seqs.m[n]
	if !ok {
		prefix := append(k8(n), regionSteps)
		c := threads.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			seq = max(seq, binary.BigEndian.Uint64(k[13:]))
		}
	}
	pos := make([]eventPos, len(evs))
	for i := range evs {
		seq++
		evs[i].Seq = seq
		if err := threads.Put(stepKey(n, evs[i].Step, seq), data[i]); err != nil {
			return err
		}
		pos[i] = eventPos{seq: seq, step: evs[i].Step}
	}
	tx.OnCommit(func() { b.events.committed(n, pos) })
	if len(b.seqs.m) >= shared.MaxThreads {
		clear(b.seqs.m)
	}
	b.seqs.m[n] = seq
	return nil
}

// notifyChange wakes whoever waits on what c changed.
func (b *Store) notifyChange(c *khaladb.ThreadChange) {
	topics := []string{khaladb.ThreadTopic(c.Thread.ID)}
	for _, t := range c.Turns {
		if t.State == khaladb.TurnQueued {
			topics = append(topics, khaladb.TopicQueue)
			break
		}
	}
	if len(c.Webhooks) > 0 {
		topics = append(topics, khaladb.TopicWebhooks)
	}
	b.hints.Notify(topics...)
}
