package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/khala/api"
)

var bucketOutbox = []byte("outbox") // sequence -> OutboxItem

// OutboxItem is a response waiting to be delivered.
type OutboxItem struct {
	Seq      uint64       `json:"seq"`
	Remote   string       `json:"remote"`
	Turn     string       `json:"turn"`
	Thread   string       `json:"thread"`
	Response api.Response `json:"response"`
	QueuedAt time.Time    `json:"queued_at"`
	// Traceparent is the turn's span (W3C), so that a delivery retried
	// later still joins the turn's trace; "" without telemetry.
	Traceparent string `json:"traceparent,omitempty"`
}

func (s *Store) ensureRemoteBuckets() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketOutbox)
		return err
	})
}

// Enqueue puts a response in the outbox, durably: from here it is
// delivered whatever happens to this process. Its spend is charged to its
// adapter in the same transaction. The same transaction drops
// the items marked delivered since the last one.
func (s *Store) Enqueue(item OutboxItem) (OutboxItem, error) {
	done := s.takeDelivered()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		if err := deleteSeqs(b, done); err != nil {
			return err
		}
		item.Seq, _ = b.NextSequence()
		if err := charge(tx, item.QueuedAt, item.Response.Adapter, SpendOf(item.Response.Usage)); err != nil {
			return err
		}
		raw, err := json.Marshal(item)
		if err != nil {
			return err
		}
		return b.Put(u64(item.Seq), raw)
	})
	if err != nil {
		s.restoreDelivered(done)
	}
	return item, err
}

// Outbox lists undelivered responses, oldest first.
func (s *Store) Outbox() ([]OutboxItem, error) {
	s.mu.Lock()
	skip := make(map[uint64]bool, len(s.delivered))
	for seq := range s.delivered {
		skip[seq] = true
	}
	s.mu.Unlock()
	var out []OutboxItem
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(_, v []byte) error {
			var it OutboxItem
			if err := json.Unmarshal(v, &it); err != nil {
				return err
			}
			if !skip[it.Seq] {
				out = append(out, it)
			}
			return nil
		})
	})
	return out, err
}

// Delivered marks a response delivered. Its deletion rides on the next
// write (Enqueue or FlushDelivered) instead of costing an fsync of its
// own: if a crash loses the mark, the response is sent again and the
// server refuses the duplicate (409), which the outbox treats as done.
func (s *Store) Delivered(seq uint64) {
	s.mu.Lock()
	s.delivered[seq] = true
	s.mu.Unlock()
}

// FlushDelivered deletes the responses marked delivered.
func (s *Store) FlushDelivered() error {
	done := s.takeDelivered()
	if len(done) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error { return deleteSeqs(tx.Bucket(bucketOutbox), done) })
	if err != nil {
		s.restoreDelivered(done)
	}
	return err
}

func (s *Store) takeDelivered() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, 0, len(s.delivered))
	for seq := range s.delivered {
		out = append(out, seq)
	}
	return out
}

func (s *Store) restoreDelivered(seqs []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seq := range seqs {
		s.delivered[seq] = true
	}
}

func deleteSeqs(b *bolt.Bucket, seqs []uint64) error {
	for _, seq := range seqs {
		if err := b.Delete(u64(seq)); err != nil {
			return err
		}
	}
	return nil
}
