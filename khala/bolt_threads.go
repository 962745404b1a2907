package khala

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/workflow"
)

// Thread implements Storage.
func (b *Bolt) Thread(ctx context.Context, id string) (*ThreadView, error) {
	n, ok := ParseThreadID(id)
	if !ok {
		return nil, ErrNotFound
	}
	var v *ThreadView
	err := b.view(ctx, func(tx *bolt.Tx) (err error) {
		v, err = b.readView(tx, n)
		return err
	})
	return v, err
}

func (b *Bolt) readView(tx *bolt.Tx, n uint64) (*ThreadView, error) {
	v := &ThreadView{}
	threads := tx.Bucket(bThreads)
	tv := threads.Get(threadKey(n))
	if tv == nil {
		return nil, ErrNotFound
	}
	err := decodeThread(tv, &v.Thread)
	if err != nil {
		return nil, err
	}
	if v.Messages, err = b.readMessages(tx, n); err != nil {
		return nil, err
	}
	// The open turns are the pending ones: a long thread's answered turns
	// are history, read one at a time (Turn) when a late request names one.
	for _, p := range v.Thread.Pending {
		raw := threads.Get(turnKey(n, p.Step))
		if raw == nil {
			continue
		}
		t, err := decodeTurn(raw)
		if err != nil {
			return nil, err
		}
		if t.Open() {
			v.Turns = append(v.Turns, t)
		}
	}
	return v, nil
}

// msgCache keeps decoded messages per thread. A message is written once
// and never changed, so a cached one is as good as the stored one, and a
// long thread's view costs a key walk instead of decoding its history.
type msgCache struct {
	mu sync.Mutex
	m  map[uint64][]workflow.Message
}

// maxCachedThreads bounds msgCache; past it the cache starts over.
const maxCachedThreads = 4096

// readMessages returns thread n's messages in step order; callers must not
// change them (they are shared with the cache).
func (b *Bolt) readMessages(tx *bolt.Tx, n uint64) ([]workflow.Message, error) {
	b.msgs.mu.Lock()
	cached := b.msgs.m[n]
	b.msgs.mu.Unlock()
	var out []workflow.Message
	i := 0
	prefix := append(k8(n), regionMessages)
	c := tx.Bucket(bThreads).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		step := int(binary.BigEndian.Uint32(k[9:]))
		if i < len(cached) && cached[i].Step == step {
			out = append(out, cached[i])
			i++
			continue
		}
		var m workflow.Message
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, fmt.Errorf("message %s: %w", TurnID(threadID(n), step), err)
		}
		out = append(out, m)
	}
	if len(out) > 0 && len(out) != len(cached) {
		out = slices.Clip(out) // a caller's append must not write into the cache
		b.msgs.mu.Lock()
		if len(b.msgs.m) >= maxCachedThreads {
			clear(b.msgs.m)
		}
		b.msgs.m[n] = out
		b.msgs.mu.Unlock()
	}
	return out, nil
}

// Turn implements Storage.
func (b *Bolt) Turn(ctx context.Context, id string) (Turn, error) {
	var t Turn
	_, n, step, ok := ParseTurnID(id)
	if !ok {
		return t, ErrNotFound
	}
	err := b.view(ctx, func(tx *bolt.Tx) (err error) {
		raw := tx.Bucket(bThreads).Get(turnKey(n, step))
		if raw == nil {
			return ErrNotFound
		}
		t, err = decodeTurn(raw)
		return err
	})
	return t, err
}

// Threads implements Storage.
func (b *Bolt) Threads(ctx context.Context, q ThreadQuery) ([]Thread, error) {
	var out []Thread
	err := b.view(ctx, func(tx *bolt.Tx) error {
		threads := tx.Bucket(bThreads)
		add := func(n uint64) (bool, error) {
			var t Thread
			if raw := threads.Get(threadKey(n)); raw != nil {
				if err := decodeThread(raw, &t); err != nil {
					return false, err
				}
			}
			if (q.Workflow == "" || t.Workflow == q.Workflow) && (q.Status == "" || t.Status == q.Status) {
				out = append(out, t)
			}
			return q.Limit > 0 && len(out) >= q.Limit, nil
		}
		// Running threads have their own index: the common question
		// ("what is still going?") does not scan history.
		if q.Status == workflow.StatusRunning {
			c := tx.Bucket(bIndex).Cursor()
			k, _ := c.Seek([]byte{ixRunning + 1})
			if k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
			for ; k != nil && k[0] == ixRunning; k, _ = c.Prev() {
				if done, err := add(binary.BigEndian.Uint64(k[1:])); done || err != nil {
					return err
				}
			}
			return nil
		}
		c := tx.Bucket(bList).Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if done, err := add(binary.BigEndian.Uint64(k)); done || err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
