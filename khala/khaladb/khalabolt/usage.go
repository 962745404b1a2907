package khalabolt

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/internal/usage/boltrollup"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// bUsage is the usage rollup: usage.RowKey -> usage.Totals (binary), added
// to in the transaction that records each answer.
var bUsage = []byte("usage")

// addSpent adds a change's usage rows to the rollup.
func addSpent(tx *bolt.Tx, rows []usage.Row) error {
	if len(rows) == 0 {
		return nil
	}
	ub := tx.Bucket(bUsage)
	for _, r := range rows {
		if err := boltrollup.Add(ub, r.Key, r.Totals); err != nil {
			return err
		}
	}
	return nil
}

// Usage implements Storage.
func (b *Store) Usage(ctx context.Context, f usage.Filter) ([]usage.Row, error) {
	var rows []usage.Row
	err := b.view(ctx, func(tx *bolt.Tx) error {
		var err error
		rows, err = boltrollup.Rows(tx.Bucket(bUsage), f)
		return err
	})
	return rows, err
}

// fillUsageRollup builds the rollup from the answers of a file written
// before it existed: each message with usage, under its thread's
// workflow.
func fillUsageRollup(tx *bolt.Tx) error {
	var (
		workflowName string
		rows         []usage.Row
	)
	err := tx.Bucket(bThreads).ForEach(func(k, v []byte) error {
		if len(k) < 9 {
			return nil
		}
		switch k[8] {
		case regionThread:
			var t khaladb.Thread
			if err := decodeThread(v, &t); err != nil {
				return err
			}
			workflowName = t.Workflow
		case regionMessages:
			var m workflow.Message
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("message record: %w", err)
			}
			if m.Usage != nil {
				r := usage.Row{Key: usage.KeyOf(m.At, workflowName, m.Role, m.Agent, m.Adapter, m.Usage)}
				r.Add(m.Usage)
				rows = append(rows, r)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return addSpent(tx, rows)
}
