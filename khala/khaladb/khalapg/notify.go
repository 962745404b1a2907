package khalapg

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Wake-ups between replicas. A change wakes this replica's waiters at
// once (hints) and is published on one NOTIFY channel for the others; each
// replica LISTENs on a connection of its own and wakes its waiters for
// what arrives. Notifications are hints: one lost (a dropped connection, a
// replica restarting) costs a waiter the server's periodic re-check, never
// a turn, and a re-established listener wakes everybody once, since it
// cannot know what it missed.
//
// Publishing is not part of the committing transaction on purpose: in
// PostgreSQL a transaction that NOTIFYs holds a database-wide lock through
// its commit's flush, which would put every commit in single file. A
// notifier goroutine instead sends what accumulated, on its own connection
// with synchronous_commit off (a hint need not be durable), so commits
// keep being flushed together and a burst of changes costs one NOTIFY.

// pgChannel is the NOTIFY channel of every replica of one database.
const pgChannel = "khala_changes"

// notifySQL sends each payload of $2 on channel $1.
const notifySQL = "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p"

// maxPayload stays under PostgreSQL's 8000-byte notification payload.
const maxPayload = 7000

// notifyInterval is the least time between two NOTIFYs of a replica: the
// most a wake-up on another replica waits (this replica's waiters are
// woken at once). Every NOTIFY wakes every replica's listening backend,
// whatever it carries, so fewer and fuller ones cost the database less.
const notifyInterval = 5 * time.Millisecond

// publish wakes waiters of topics here and, shortly, on other replicas.
func (p *Store) publish(topics ...string) {
	if len(topics) == 0 {
		return
	}
	p.hints.Notify(topics...)
	p.notify.add(topics)
}

type pgNotifier struct {
	p    *Store
	kick chan struct{}

	mu      sync.Mutex
	pending map[string]struct{}
	pid     uint32 // backend of our notifying connection: its echoes are skipped
}

func newPGNotifier(p *Store) *pgNotifier {
	return &pgNotifier{p: p, kick: make(chan struct{}, 1), pending: map[string]struct{}{}}
}

func (n *pgNotifier) add(topics []string) {
	n.mu.Lock()
	for _, t := range topics {
		n.pending[t] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *pgNotifier) ownPID() uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

// take returns the pending topics packed into payloads.
func (n *pgNotifier) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	var b strings.Builder
	for t := range n.pending {
		if b.Len() > 0 && b.Len()+1+len(t) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(t)
	}
	clear(n.pending)
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// dial opens the notifying connection. Open dials it before it returns
// and run again as soon as one is lost, so no wake-up waits for a
// connection (a backend's start and authentication: 10–40 ms).
func (n *pgNotifier) dial(ctx context.Context) (*pgx.Conn, error) {
	cfg := n.p.cfg.ConnConfig.Copy()
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, n.p.fail("connect to notify", err) // logged once per outage
	}
	// Prepared now (an empty array notifies nobody): a fresh backend's
	// first statement costs milliseconds the first wake-up would wait.
	_, _ = conn.Exec(ctx, notifySQL, pgChannel, []string{})
	n.mu.Lock()
	n.pid = conn.PgConn().PID()
	n.mu.Unlock()
	return conn, nil
}

// run sends what accumulated on conn (nil: dial first) until ctx ends.
func (n *pgNotifier) run(ctx context.Context, conn *pgx.Conn) {
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		payloads := n.take()
		if len(payloads) == 0 {
			continue
		}
		if conn == nil {
			c, err := n.dial(ctx)
			if err != nil {
				continue // the hints are dropped; waiters re-check
			}
			conn = c
		}
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := conn.Exec(ectx, notifySQL, pgChannel, payloads)
		cancel()
		if err != nil {
			conn.Close(context.Background())
			// Redial now rather than at the next change, which would
			// then wait for it; failing, the next change tries again.
			conn, _ = n.dial(ctx)
		}
		// What changes meanwhile goes out together in the next NOTIFY: a
		// lone change is sent at once, a busy replica sends a few hundred
		// a second however many commits they stand for.
		select {
		case <-ctx.Done():
			return
		case <-time.After(notifyInterval):
		}
	}
}

// dialListener opens the listening connection. Open does it before
// it returns, so a replica that answers requests hears the others.
func (p *Store) dialListener(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.cfg.ConnConfig.Copy())
	if err != nil {
		return nil, p.fail("connect to listen", err)
	}
	for _, ch := range []string{pgChannel, revokeChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			conn.Close(context.Background())
			return nil, p.fail("listen", err)
		}
	}
	return conn, nil
}

// listen relays other replicas' notifications to this one's waiters until
// ctx ends, reconnecting (with capped backoff) whenever the connection is
// lost.
func (p *Store) listen(ctx context.Context, conn *pgx.Conn) {
	backoff := 100 * time.Millisecond
	for {
		if conn != nil {
			backoff = 100 * time.Millisecond
			for {
				nt, err := conn.WaitForNotification(ctx)
				if err != nil {
					break
				}
				if nt.Channel == revokeChannel {
					p.forgetAgents()
					continue
				}
				if nt.PID != p.notify.ownPID() {
					p.hints.Notify(strings.Split(nt.Payload, "\n")...)
				}
			}
			conn.Close(context.Background())
			conn = nil
		}
		// Jitter: replicas that lost the database together do not all
		// come back in the same instant.
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff + rand.N(backoff/2)):
		}
		backoff = min(backoff*2, 5*time.Second)
		c, err := p.dialListener(ctx)
		if err != nil {
			continue
		}
		conn = c
		// What changed while nobody listened is unknown: everyone looks,
		// and an agent revoked meanwhile must not outlive the gap.
		p.forgetAgents()
		p.hints.NotifyAll()
	}
}
