package khalabolt

import (
	"encoding/binary"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The queue's index key leads with the priority, so a cursor from the
// start of the 'q' range meets higher priorities first and, within one,
// the oldest turn first: a claim reads keys in order and sorts nothing.
//
//	'q', ^priority (sign bit flipped, inverted), first queued, N, step

// queueKey is the queue index entry of turn step of thread n.
func queueKey(priority int, firstQueued time.Time, n uint64, step int) []byte {
	k := binary.BigEndian.AppendUint32([]byte{ixQueue}, priorityRank(priority))
	k = binary.BigEndian.AppendUint64(k, uint64(max(firstQueued.UnixNano(), 0)))
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(k, n), uint32(step))
}

// priorityRank maps a priority to a key part that sorts higher
// priorities first: flipping the sign bit makes int32 order unsigned
// order, and inverting it reverses that order.
func priorityRank(p int) uint32 { return ^(uint32(int32(p)) ^ 1<<31) }

// queueParse returns the thread and step of a queue key.
func queueParse(k []byte) (n uint64, step int) {
	return binary.BigEndian.Uint64(k[13:21]), int(binary.BigEndian.Uint32(k[21:25]))
}

// upgradeQueue converts a format 1 file, whose queue keys had no
// priority, to format 2: every queued turn keeps its place, at priority 0.
func upgradeQueue(tx *bolt.Tx) error {
	ix := tx.Bucket(bIndex)
	type entry struct{ k, v []byte }
	var old []entry
	c := ix.Cursor()
	for k, v := c.Seek([]byte{ixQueue}); k != nil && k[0] == ixQueue; k, v = c.Next() {
		old = append(old, entry{slices.Clone(k), slices.Clone(v)})
	}
	for _, e := range old {
		if len(e.k) != 21 {
			return errBadRecord
		}
		at, n, step := ixParse(e.k)
		if err := ix.Delete(e.k); err != nil {
			return err
		}
		if err := ix.Put(queueKey(0, at, n, step), e.v); err != nil {
			return err
		}
	}
	return nil
}
