package khalabolt

import (
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
)

// bUsage is the usage rollup: usage.RowKey -> usage.Totals (JSON), added
// to in the transaction that records each answer.
var bUsage = []byte("usage")

// addSpent adds a change's usage rows to the rollup.
func addSpent(tx *bolt.Tx, rows []usage.Row) error {
	if len(rows) == 0 {
		return nil
	}
	ub := tx.Bucket(bUsage)
	for _, r := range rows {
		key := usage.RowKey(r.Key)
		var tot usage.Totals
		if raw := ub.Get(key); raw != nil {
			if err := json.Unmarshal(raw, &tot); err != nil {
				return err
			}
		}
		tot.Merge(r.Totals)
		raw, err := json.Marshal(tot)
		if err != nil {
			return err
		}
		if err := ub.Put(key, raw); err != nil {
			return err
		}
	}
	return nil
}

// Usage implements Storage.
func (b *Store) Usage(ctx context.Context, f usage.Filter) ([]usage.Row, error) {
	var rows []usage.Row
	err := b.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bUsage).Cursor()
		for k, v := c.Seek([]byte(f.Since)); k != nil; k, v = c.Next() {
			key, ok := usage.ParseRowKey(k)
			if !ok || !f.Match(key) {
				continue
			}
			r := usage.Row{Key: key}
			if err := json.Unmarshal(v, &r.Totals); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return nil
	})
	return rows, err
}
