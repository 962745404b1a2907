package store

import (
	"bytes"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// bucketSpend holds what each adapter spent per UTC day, keyed
// "2026-11-25/claude": the daily caps read it, and it survives restarts.
// It is written in the same transaction as the answer that spent it (a
// local thread's message, a remote turn's outbox item), so counting costs
// no write of its own and an answer is counted exactly once.
var bucketSpend = []byte("spend")

// DayFormat names a UTC day in the spend records.
const DayFormat = time.DateOnly

// Spend is what an adapter's answers cost on one day.
type Spend struct {
	USD    float64 `json:"usd"`
	Tokens int64   `json:"tokens"`
	Turns  int64   `json:"turns"`
}

// SpendOf reads what one answer cost from the usage its CLI reported:
// the dollars it gave (none: 0) and every token it processed (input,
// output and cache reads, as a thread's limits.max_tokens counts them).
// It is the one place spend is read from a usage.
func SpendOf(u *usage.Usage) Spend {
	if u == nil {
		return Spend{}
	}
	sp := Spend{Tokens: u.Tokens(), Turns: 1}
	if u.CostUSD != nil {
		sp.USD = *u.CostUSD
	}
	return sp
}

// Spent returns what each adapter spent on day (DayFormat), by adapter.
func (s *Store) Spent(day string) (map[string]Spend, error) {
	out := map[string]Spend{}
	prefix := []byte(day + "/")
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSpend).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var sp Spend
			if err := json.Unmarshal(v, &sp); err != nil {
				return err
			}
			out[string(k[len(prefix):])] = sp
		}
		return nil
	})
	return out, err
}

// chargeNew adds the spend of the messages stored for the first time to
// their adapters' days; mb is the thread's message bucket before they are
// put. A message stored again (a merge changed it) was charged already.
func chargeNew(tx *bolt.Tx, mb *bolt.Bucket, msgs []workflow.Message) error {
	for _, m := range msgs {
		if m.Adapter == "" || m.Usage == nil || m.Child != "" || mb.Get(u64(uint64(m.Step))) != nil {
			continue
		}
		if err := charge(tx, m.At, m.Adapter, SpendOf(m.Usage)); err != nil {
			return err
		}
	}
	return nil
}

// charge adds sp to adapter's spend on at's UTC day.
func charge(tx *bolt.Tx, at time.Time, adapter string, sp Spend) error {
	if adapter == "" || sp == (Spend{}) {
		return nil
	}
	if at.IsZero() {
		at = time.Now()
	}
	b := tx.Bucket(bucketSpend)
	key := []byte(at.UTC().Format(DayFormat) + "/" + adapter)
	var cur Spend
	if v := b.Get(key); v != nil {
		if err := json.Unmarshal(v, &cur); err != nil {
			return err
		}
	}
	cur.USD += sp.USD
	cur.Tokens += sp.Tokens
	cur.Turns += sp.Turns
	raw, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}
