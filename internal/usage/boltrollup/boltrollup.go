package boltrollup

import (
	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
)

// Add merges t into the row of key in b.
func Add(b *bolt.Bucket, key usage.Key, t usage.Totals) error {
	k := usage.RowKey(key)
	var tot usage.Totals
	if raw := b.Get(k); raw != nil {
		if err := tot.UnmarshalBinary(raw); err != nil {
			return err
		}
	}
	tot.Merge(t)
	raw, err := tot.AppendBinary(nil)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

// Rows returns the rows of b that f selects, in key order (day first, so
// the scan starts at f.Since).
func Rows(b *bolt.Bucket, f usage.Filter) ([]usage.Row, error) {
	var rows []usage.Row
	c := b.Cursor()
	for k, v := c.Seek([]byte(f.Since)); k != nil; k, v = c.Next() {
		key, ok := usage.ParseRowKey(k)
		if !ok || !f.Match(key) {
			continue
		}
		r := usage.Row{Key: key}
		if err := r.Totals.UnmarshalBinary(v); err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}
