package khalabolt

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	bolt "go.etcd.io/bbolt"
)

// bSeen keeps when each agent was last seen apart from its record, which
// never changes once enrolled (the agents cache relies on that; a revoke
// clears the cache).
var bSeen = []byte("seen") // agent name -> last seen, unix nanos (8 bytes)

// Agents implements Storage. The turns held are the lease index's
// entries: every claimed turn has one, and nothing else does.
func (b *Store) Agents(ctx context.Context) ([]khaladb.AgentStatus, error) {
	var out []khaladb.AgentStatus
	err := b.view(ctx, func(tx *bolt.Tx) error {
		seen := tx.Bucket(bSeen)
		byName := map[string]int{}
		err := tx.Bucket(bAgents).ForEach(func(k, v []byte) error {
			var a khaladb.Agent
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			st := khaladb.AgentStatus{Name: a.Name, EnrolledAt: a.EnrolledAt, Scopes: a.Scopes}
			if at := seen.Get(k); len(at) == 8 {
				st.LastSeen = shared.FromNanos(int64(binary.BigEndian.Uint64(at)))
			}
			byName[a.Name] = len(out)
			out = append(out, st)
			return nil
		})
		if err != nil {
			return err
		}
		return heldTurns(tx, func(agent, turn string) {
			if i, ok := byName[agent]; ok {
				out[i].Held = append(out[i].Held, turn)
			}
		})
	})
	return out, err
}

// heldTurns calls held for every claimed turn, in thread and step order.
func heldTurns(tx *bolt.Tx, held func(agent, turn string)) error {
	type claimed struct {
		n    uint64
		step int
	}
	var turns []claimed
	c := tx.Bucket(bIndex).Cursor()
	for k, _ := c.Seek([]byte{ixLease}); k != nil && k[0] == ixLease; k, _ = c.Next() {
		_, n, step := ixParse(k)
		turns = append(turns, claimed{n, step})
	}
	slices.SortFunc(turns, func(a, b claimed) int { return cmp.Or(cmp.Compare(a.n, b.n), cmp.Compare(a.step, b.step)) })
	for _, t := range turns {
		v := tx.Bucket(bThreads).Get(turnKey(t.n, t.step))
		if v == nil {
			continue
		}
		h, _, err := splitTurn(v)
		if err != nil {
			return err
		}
		held(h.Agent, khaladb.TurnID(khaladb.ThreadID(t.n), t.step))
	}
	return nil
}

// SawAgents implements Storage.
func (b *Store) SawAgents(ctx context.Context, seen map[string]time.Time) error {
	if len(seen) == 0 {
		return ctx.Err()
	}
	return b.update(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bSeen)
		for name, at := range seen {
			k := []byte(name)
			if tx.Bucket(bAgents).Get(k) == nil {
				continue
			}
			if old := sb.Get(k); len(old) == 8 && int64(binary.BigEndian.Uint64(old)) >= shared.Nanos(at) {
				continue
			}
			if err := sb.Put(k, binary.BigEndian.AppendUint64(nil, uint64(shared.Nanos(at)))); err != nil {
				return err
			}
		}
		return nil
	})
}
