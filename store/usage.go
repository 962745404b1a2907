package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/internal/usage/boltrollup"
	"github.com/nerve-agents/nerve/workflow"
)

// bucketUsage is the usage rollup: one row per day, workflow, role, agent,
// adapter and model, kept as answers are written, so `nerve usage` reads
// a few rows instead of every message.
var bucketUsage = []byte("usage")

// ensureUsage creates the rollup, filled from the messages already stored
// (a nerve.db from before the rollup), once.
func (s *Store) ensureUsage() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketUsage) != nil {
			return nil
		}
		ub, err := tx.CreateBucket(bucketUsage)
		if err != nil {
			return err
		}
		threads := tx.Bucket(bucketThreads)
		return tx.Bucket(bucketMessages).ForEachBucket(func(id []byte) error {
			var t workflow.Thread
			raw := threads.Get(id)
			if raw == nil {
				return nil
			}
			if err := json.Unmarshal(raw, &t); err != nil {
				return fmt.Errorf("thread %s: %w", id, err)
			}
			return tx.Bucket(bucketMessages).Bucket(id).ForEach(func(_, raw []byte) error {
				var m workflow.Message
				if err := json.Unmarshal(raw, &m); err != nil {
					return fmt.Errorf("thread %s: %w", id, err)
				}
				return addUsage(ub, t.Workflow, m)
			})
		})
	})
}

// addUsage counts a newly stored message in the rollup.
func addUsage(ub *bolt.Bucket, workflowName string, m workflow.Message) error {
	if m.Usage == nil {
		return nil
	}
	var one usage.Totals
	one.Add(m.Usage)
	return boltrollup.Add(ub, usage.KeyOf(m.At, workflowName, m.Role, m.Agent, m.Adapter, m.Usage), one)
}

// Usage returns the rollup rows f selects.
func (s *Store) Usage(f usage.Filter) ([]usage.Row, error) {
	var rows []usage.Row
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		rows, err = boltrollup.Rows(tx.Bucket(bucketUsage), f)
		return err
	})
	return rows, err
}
