package store

import (
	"encoding/json"
	"time"

	"github.com/nerve-agents/nerve/remote"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketClaims = []byte("claims") // remote/turn -> ClaimRecord
	bucketOutbox = []byte("outbox") // sequence -> OutboxItem
)

// ClaimRecord is a remote turn this daemon holds: what a restart after a
// crash must give back.
type ClaimRecord struct {
	Remote    string      `json:"remote"`
	Turn      remote.Turn `json:"turn"`
	Adapter   string      `json:"adapter"`
	StartedAt time.Time   `json:"started_at"`
}

// OutboxItem is a response waiting to be delivered.
type OutboxItem struct {
	Seq      uint64          `json:"seq"`
	Remote   string          `json:"remote"`
	Turn     string          `json:"turn"`
	Thread   string          `json:"thread"`
	Response remote.Response `json:"response"`
	QueuedAt time.Time       `json:"queued_at"`
}

func claimKey(remoteName, turn string) []byte { return []byte(remoteName + "/" + turn) }

func (s *Store) ensureRemoteBuckets() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketClaims, bucketOutbox} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutClaim records a claimed turn before its adapter starts.
func (s *Store) PutClaim(c ClaimRecord) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketClaims).Put(claimKey(c.Remote, c.Turn.Turn), raw)
	})
}

// DeleteClaim forgets a claim (released, lost, or answered).
func (s *Store) DeleteClaim(remoteName, turn string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketClaims).Delete(claimKey(remoteName, turn))
	})
}

// Claims lists the claims recorded as held.
func (s *Store) Claims() ([]ClaimRecord, error) {
	var out []ClaimRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketClaims).ForEach(func(_, v []byte) error {
			var c ClaimRecord
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	return out, err
}

// Enqueue puts a response in the outbox and drops its claim record, in
// one transaction: from here the response is delivered, whatever happens
// to this process.
func (s *Store) Enqueue(item OutboxItem) (OutboxItem, error) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		item.Seq, _ = b.NextSequence()
		raw, err := json.Marshal(item)
		if err != nil {
			return err
		}
		if err := b.Put(u64(item.Seq), raw); err != nil {
			return err
		}
		return tx.Bucket(bucketClaims).Delete(claimKey(item.Remote, item.Turn))
	})
	return item, err
}

// Outbox lists undelivered responses, oldest first.
func (s *Store) Outbox() ([]OutboxItem, error) {
	var out []OutboxItem
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(_, v []byte) error {
			var it OutboxItem
			if err := json.Unmarshal(v, &it); err != nil {
				return err
			}
			out = append(out, it)
			return nil
		})
	})
	return out, err
}

// Delivered removes a response from the outbox.
func (s *Store) Delivered(seq uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).Delete(u64(seq))
	})
}
