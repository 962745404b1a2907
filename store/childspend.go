package store

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// What a child thread an agent started from inside a turn spends counts
// in its parent's totals (and budget). A moderator's child reaches its
// parent in the message of the step that waited for it (ChildUsage); an
// agent's child (Parent.Step 0) has no such step, so the transaction that
// ends it passes its totals up: into the parent's record when the parent
// has ended, else into bucketChildSpend, which the parent's next commit
// counts and empties. The parent's engine holds the thread in memory and
// writes it whole, so only its own commit may change its totals.

// bucketChildSpend: parent thread id → usage.Totals (binary) its ended
// agent-started children spent that it has not counted yet.
var bucketChildSpend = []byte("child_spend")

// ChildSpend is what thread's agent-started children that ended since its
// last commit spent: its next Commit counts it in the thread's totals.
func (s *Store) ChildSpend(thread string) (usage.Totals, error) {
	var tot usage.Totals
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		tot, _, err = pendingSpend(tx, thread)
		return err
	})
	return tot, err
}

// pendingSpend is what thread's ended children left for it, and whether
// they left anything.
func pendingSpend(tx *bolt.Tx, thread string) (usage.Totals, bool, error) {
	var tot usage.Totals
	raw := tx.Bucket(bucketChildSpend).Get([]byte(thread))
	if raw == nil {
		return tot, false, nil
	}
	return tot, true, tot.UnmarshalBinary(raw)
}

// takeChildSpend removes what t's children left for it and returns it,
// for the commit writing t to count.
func takeChildSpend(tx *bolt.Tx, t *workflow.Thread) (usage.Totals, bool, error) {
	tot, ok, err := pendingSpend(tx, t.ID)
	if !ok || err != nil {
		return tot, false, err
	}
	return tot, true, tx.Bucket(bucketChildSpend).Delete([]byte(t.ID))
}

// spendUp passes the totals of agent-started child t up to its parent in
// the transaction that ends t (once: not when t was stored ended before).
func spendUp(tx *bolt.Tx, t *workflow.Thread) error {
	if t.Parent == nil || t.Parent.Step != 0 || !t.Ended() || t.Usage.Messages == 0 {
		return nil
	}
	threads := tx.Bucket(bucketThreads)
	if raw := threads.Get([]byte(t.ID)); raw != nil {
		var was struct{ Status string }
		if err := json.Unmarshal(raw, &was); err != nil {
			return err
		}
		if was.Status != workflow.StatusRunning {
			return nil // counted when it ended
		}
	}
	return addChildSpend(tx, t.Parent.Thread, t.Usage)
}

// addChildSpend counts tot in thread's totals: left for its next commit
// while it runs; written into its record when it has ended, and from an
// ended agent-started child on up to its own parent.
func addChildSpend(tx *bolt.Tx, thread string, tot usage.Totals) error {
	threads := tx.Bucket(bucketThreads)
	for {
		raw := threads.Get([]byte(thread))
		if raw == nil {
			return nil // removed: nothing to count it in
		}
		var p workflow.Thread
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		if !p.Ended() {
			left, _, err := pendingSpend(tx, thread)
			if err != nil {
				return err
			}
			left.Merge(tot)
			enc, _ := left.AppendBinary(nil)
			return tx.Bucket(bucketChildSpend).Put([]byte(thread), enc)
		}
		p.Usage.Merge(tot)
		enc, err := json.Marshal(&p)
		if err != nil {
			return err
		}
		if err := threads.Put([]byte(thread), enc); err != nil {
			return err
		}
		// A moderator's child that ended gave its totals to its parent's
		// step already: what comes later stays in its own.
		if p.Parent == nil || p.Parent.Step != 0 {
			return nil
		}
		thread = p.Parent.Thread
	}
}
