package khaladb

import "time"

// Heartbeats cost a durable write about once per lease period, not once
// per heartbeat. Agents heartbeat about every third of a lease; a
// heartbeat at now needs the turn held until at least now + lease. The
// stored expiry is written only when it would end sooner than that, and
// then it is set two leases ahead (LeaseAhead), so the next few
// heartbeats find it far enough ahead and write nothing: a heartbeat every
// third of a lease writes once every four, i.e. once per 4/3 of a lease.
//
// Nothing about a lease lives only in one process's memory: the stored
// expiry is the lease, on every replica and after any crash. So:
//   - a crash of Khala (or of a replica, or of PostgreSQL) loses no lease
//     and no acknowledged answer: answers are durable writes as before,
//     and the stored expiry of a live agent's turn is always at least a
//     third of a lease ahead of its last heartbeat's next one;
//   - a dead agent keeps its turn until the stored expiry: more than one
//     lease and at most two leases after its last heartbeat (the last
//     write was at or before it, and set the expiry two leases ahead of
//     itself); the sweeper then re-queues it, crash or not;
//   - a heartbeat through any replica is seen by all, since whenever it
//     matters it is a write to the shared database, and when it is not
//     written, the stored expiry already covers what it asked for.
//
// A heartbeat that writes nothing still reads the turn (bbolt: a read
// transaction; PostgreSQL: a statement that updates no row, so commits
// no transaction id and flushes no WAL), so a claim lost or a thread
// cancelled is told at once, as before.

// LeaseAhead is how many leases past a heartbeat a written expiry lies.
const LeaseAhead = 2

// HeartbeatExpiry says whether a heartbeat at now of a turn whose stored
// lease expiry is stored must write, and if so the expiry to write.
func HeartbeatExpiry(stored, now time.Time, lease time.Duration) (time.Time, bool) {
	if !stored.Before(now.Add(lease)) {
		return stored, false
	}
	return now.Add(LeaseAhead * lease), true
}
