package khalabolt

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/workflow"
)

// Claim implements Storage.
func (b *Store) Claim(ctx context.Context, q khaladb.ClaimQuery) ([]khaladb.Turn, error) {
	// Look before taking the writer: most claims of a long poll find
	// nothing, and a read costs no fsync.
	var found bool
	if err := b.view(ctx, func(tx *bolt.Tx) error {
		found = len(matchQueue(tx, q, 1)) > 0
		return nil
	}); err != nil || !found {
		return nil, err
	}
	var raws [][]byte // the claimed turns, stored form
	err := b.update(func(tx *bolt.Tx) error {
		raws = raws[:0]
		threads := tx.Bucket(bThreads)
		for _, k := range matchQueue(tx, q, q.Max) {
			n, step := queueParse(k)
			raw := threads.Get(turnKey(n, step))
			var h turnHead
			var body []byte
			if raw != nil {
				var err error
				if h, body, err = splitTurn(raw); err != nil {
					return err
				}
			}
			if h.State != khaladb.TurnQueued {
				// An entry that outlived its turn: never hand it out, and
				// do not trip over it again.
				if err := tx.Bucket(bIndex).Delete(k); err != nil {
					return err
				}
				continue
			}
			old := h
			h.State, h.Claim, h.Agent = khaladb.TurnClaimed, khaladb.NewClaimID(), q.Agent
			h.ClaimedAt, h.LeaseExpires, h.IdleAt = q.Now, q.Now.Add(h.Lease), time.Time{}
			h.Rev++
			role := parseQueueValue(tx.Bucket(bIndex).Get(k)).role
			if err := putTurn(tx, n, step, &old, h, body, nil); err != nil {
				return err
			}
			id := khaladb.ThreadID(n)
			ev := workflow.Event{At: q.Now, Type: workflow.EventTurnStarted, Thread: id, Step: step,
				Role: role, Agent: h.Agent, Turn: khaladb.TurnID(id, step), Claim: h.Claim, Attempt: h.Attempt}
			data, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if err := b.appendEvents(tx, n, []workflow.Event{ev}, [][]byte{data}); err != nil {
				return err
			}
			raws = append(raws, turnValue(h, body))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]khaladb.Turn, 0, len(raws))
	for _, raw := range raws {
		t, err := decodeTurn(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		b.hints.Notify(khaladb.ThreadTopic(t.Thread))
	}
	return out, nil
}

// matchQueue returns the queue keys of up to max turns that q accepts,
// higher priority first, then oldest first: the keys' order.
func matchQueue(tx *bolt.Tx, q khaladb.ClaimQuery, max int) [][]byte {
	var keys [][]byte
	c := tx.Bucket(bIndex).Cursor()
	for k, v := c.Seek([]byte{ixQueue}); k != nil && k[0] == ixQueue && len(keys) < max; k, v = c.Next() {
		e := parseQueueValue(v)
		if len(q.Workflows) > 0 && !slices.Contains(q.Workflows, e.workflow) {
			continue
		}
		// A merge turn is any serving agent's, whatever roles it plays.
		if len(q.Roles) > 0 && e.role != khaladb.MergeRole && !slices.Contains(q.Roles, e.role) {
			continue
		}
		if !q.Repos.Admits(e.repo, e.declared) {
			continue
		}
		keys = append(keys, slices.Clone(k))
	}
	return keys
}

// Heartbeat implements Storage. Most heartbeats only read (see
// khaladb.HeartbeatExpiry); one that must move the stored expiry writes
// it, checking again in the write transaction.
func (b *Store) Heartbeat(ctx context.Context, turn, claim, agent string, now time.Time) (khaladb.Turn, error) {
	_, n, step, ok := khaladb.ParseTurnID(turn)
	if !ok {
		return khaladb.Turn{}, khaladb.ErrNotFound
	}
	var (
		raw    []byte
		result error
		write  bool
	)
	if err := b.view(ctx, func(tx *bolt.Tx) error {
		raw, write, result = heartbeat(tx, n, step, claim, agent, now, false)
		return nil
	}); err != nil {
		return khaladb.Turn{}, err
	}
	if write {
		err := b.update(func(tx *bolt.Tx) error {
			raw, _, result = heartbeat(tx, n, step, claim, agent, now, true)
			return nil
		})
		if err != nil {
			return khaladb.Turn{}, err
		}
	}
	if result != nil {
		return khaladb.Turn{}, result
	}
	return decodeTurn(raw)
}

// heartbeat checks agent's hold under claim on turn step of thread n at
// now, and returns the turn and whether its expiry must be written; with
// write (in a write transaction) it writes it.
func heartbeat(tx *bolt.Tx, n uint64, step int, claim, agent string, now time.Time, write bool) ([]byte, bool, error) {
	v := tx.Bucket(bThreads).Get(turnKey(n, step))
	if v == nil {
		return nil, false, khaladb.ErrNotFound
	}
	h, body, err := splitTurn(v)
	switch {
	case err != nil:
		return nil, false, err
	case h.Claim != claim:
		return nil, false, khaladb.ErrClaimLost
	case h.Agent != agent:
		return nil, false, khaladb.ErrNotHolder
	case h.State == khaladb.TurnCancelled:
		return bytes.Clone(v), false, nil // the caller says cancel: true
	case h.State != khaladb.TurnClaimed || now.After(h.LeaseExpires):
		return nil, false, khaladb.ErrClaimLost
	}
	expires, must := khaladb.HeartbeatExpiry(h.LeaseExpires, now, h.Lease)
	if !must || !write {
		return bytes.Clone(v), must, nil
	}
	old := h
	h.LeaseExpires = expires
	h.Rev++
	if err := putTurn(tx, n, step, &old, h, body, nil); err != nil {
		return nil, false, err
	}
	return turnValue(h, body), false, nil
}

// Due implements Storage.
func (b *Store) Due(ctx context.Context, now time.Time, limit int) ([]khaladb.DueTurn, time.Time, error) {
	var (
		out  []khaladb.DueTurn
		next time.Time
	)
	err := b.view(ctx, func(tx *bolt.Tx) error {
		for _, idx := range []struct {
			prefix byte
			kind   string
		}{{ixLease, khaladb.DueExpired}, {ixIdle, khaladb.DueIdle}, {ixChild, khaladb.DueChild}} {
			c := tx.Bucket(bIndex).Cursor()
			for k, v := c.Seek([]byte{idx.prefix}); k != nil && k[0] == idx.prefix; k, v = c.Next() {
				at, n, step := ixParse(k)
				if at.After(now) {
					if next.IsZero() || at.Before(next) {
						next = at
					}
					break
				}
				if len(out) >= limit {
					next = now // more is due now
					break
				}
				id := khaladb.ThreadID(n)
				d := khaladb.DueTurn{Kind: idx.kind, Turn: khaladb.TurnID(id, step), Thread: id}
				if idx.kind == khaladb.DueExpired {
					d.Claim = string(v)
				}
				out = append(out, d)
			}
		}
		return nil
	})
	return out, next, err
}

// Stats implements Storage.
func (b *Store) Stats(ctx context.Context) (khaladb.Stats, error) {
	var s khaladb.Stats
	err := b.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bIndex).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			switch k[0] {
			case ixQueue:
				s.Queued++
			case ixLease:
				s.Claimed++
			case ixRunning:
				s.Running++
			case ixWaiting:
				s.Waiting++
			}
		}
		return nil
	})
	return s, err
}

// addWebhook numbers w and puts it in the outbox, due at w.NextAt.
func addWebhook(tx *bolt.Tx, w *khaladb.Webhook) error {
	id, err := nextCounter(tx, kNextHook)
	if err != nil {
		return err
	}
	w.ID = id
	if err := putJSON(tx.Bucket(bHooks), k8(id), w); err != nil {
		return err
	}
	return tx.Bucket(bHookDue).Put(timeKey(w.NextAt, k8(id)), nil)
}

// ClaimWebhooks implements Storage.
func (b *Store) ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, max int) ([]khaladb.Webhook, time.Time, error) {
	var (
		out  []khaladb.Webhook
		next time.Time
	)
	due := func(tx *bolt.Tx) [][]byte {
		var keys [][]byte
		next = time.Time{}
		c := tx.Bucket(bHookDue).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if keyTime(k).After(now) || len(keys) >= max {
				next = keyTime(k)
				break
			}
			keys = append(keys, append([]byte(nil), k...))
		}
		return keys
	}
	var n int
	if err := b.view(ctx, func(tx *bolt.Tx) error { n = len(due(tx)); return nil }); err != nil || n == 0 {
		return nil, next, err
	}
	err := b.update(func(tx *bolt.Tx) error {
		out = out[:0]
		hooks, idx := tx.Bucket(bHooks), tx.Bucket(bHookDue)
		for _, k := range due(tx) {
			var w khaladb.Webhook
			ok, err := getJSON(hooks, k[8:], &w)
			if err != nil {
				return err
			}
			if err := idx.Delete(k); err != nil {
				return err
			}
			if !ok {
				continue
			}
			w.NextAt = now.Add(lease)
			if err := putJSON(hooks, k[8:], w); err != nil {
				return err
			}
			if err := idx.Put(timeKey(w.NextAt, k[8:]), nil); err != nil {
				return err
			}
			out = append(out, w)
		}
		return nil
	})
	if next.IsZero() && len(out) > 0 {
		next = now.Add(lease)
	}
	return out, next, err
}

// FinishWebhook implements Storage.
func (b *Store) FinishWebhook(ctx context.Context, id uint64, attempts int, retryAt time.Time, lastErr string) error {
	if !retryAt.IsZero() {
		// The deliverer sleeps until the next due time it knows: wake it.
		defer b.hints.Notify(khaladb.TopicWebhooks)
	}
	return b.update(func(tx *bolt.Tx) error {
		hooks, idx := tx.Bucket(bHooks), tx.Bucket(bHookDue)
		var w khaladb.Webhook
		ok, err := getJSON(hooks, k8(id), &w)
		if err != nil || !ok {
			return err
		}
		if err := idx.Delete(timeKey(w.NextAt, k8(id))); err != nil {
			return err
		}
		if retryAt.IsZero() {
			return hooks.Delete(k8(id))
		}
		w.Attempts, w.NextAt, w.LastErr = attempts, retryAt, lastErr
		if err := putJSON(hooks, k8(id), w); err != nil {
			return err
		}
		return idx.Put(timeKey(w.NextAt, k8(id)), nil)
	})
}
