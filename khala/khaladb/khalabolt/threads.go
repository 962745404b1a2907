package khalabolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nerve-agents/nerve/khala/khaladb"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/workflow"
)

// Thread implements Storage.
func (b *Store) Thread(ctx context.Context, id string) (*khaladb.ThreadView, error) {
	n, ok := khaladb.ParseThreadID(id)
	if !ok {
		return nil, khaladb.ErrNotFound
	}
	var v *khaladb.ThreadView
	err := b.view(ctx, func(tx *bolt.Tx) (err error) {
		v, err = b.readView(tx, n)
		return err
	})
	return v, err
}

func (b *Store) readView(tx *bolt.Tx, n uint64) (*khaladb.ThreadView, error) {
	v := &khaladb.ThreadView{}
	threads := tx.Bucket(bThreads)
	tv := threads.Get(threadKey(n))
	if tv == nil {
		return nil, khaladb.ErrNotFound
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

// readMessages returns thread n's messages in step order; callers must not
// change them (they are shared with the cache).
func (b *Store) readMessages(tx *bolt.Tx, n uint64) ([]workflow.Message, error) {
	cached := b.msgs.Get(n)
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
			return nil, fmt.Errorf("message %s: %w", khaladb.TurnID(khaladb.ThreadID(n), step), err)
		}
		out = append(out, m)
	}
	if len(out) > 0 && len(out) != len(cached) {
		out = slices.Clip(out) // a caller's append must not write into the cache
		b.msgs.Put(n, out)
	}
	return out, nil
}

// Turn implements Storage.
func (b *Store) Turn(ctx context.Context, id string) (khaladb.Turn, error) {
	var t khaladb.Turn
	_, n, step, ok := khaladb.ParseTurnID(id)
	if !ok {
		return t, khaladb.ErrNotFound
	}
	err := b.view(ctx, func(tx *bolt.Tx) (err error) {
		raw := tx.Bucket(bThreads).Get(turnKey(n, step))
		if raw == nil {
			return khaladb.ErrNotFound
		}
		t, err = decodeTurn(raw)
		return err
	})
	return t, err
}

// Threads implements Storage.
func (b *Store) Threads(ctx context.Context, q khaladb.ThreadQuery) ([]khaladb.Thread, error) {
	var out []khaladb.Thread
	err := b.view(ctx, func(tx *bolt.Tx) error {
		threads := tx.Bucket(bThreads)
		add := func(n uint64) (bool, error) {
			var t khaladb.Thread
			if raw := threads.Get(threadKey(n)); raw != nil {
				if err := decodeThread(raw, &t); err != nil {
					t = khaladb.Unreadable(khaladb.ThreadID(n), "", err)
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
