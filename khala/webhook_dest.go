package khala

import (
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Per destination (host:port), at most webhookPerDest deliveries are in
// flight, and one that failed backs its destination off: its other
// deliveries wait (without counting an attempt) instead of taking
// workers. So sixteen receivers that never answer hold 32 of the
// webhookWorkers at most, each for webhookResponseTimeout, and everyone
// else's webhooks go out at once. The state is this replica's: on
// PostgreSQL each replica bounds its own deliveries.
const (
	webhookPerDest = 2
	// webhookDeferred is how long a delivery waits when its destination
	// has all its slots busy.
	webhookDeferred = time.Second
	// webhookDestBackoffMax caps a failing destination's back-off.
	webhookDestBackoffMax = time.Minute
)

type destinations struct {
	mu       sync.Mutex
	inflight map[string]int
	failing  map[string]destFailure
}

type destFailure struct {
	fails int
	until time.Time
}

func newDestinations() *destinations {
	return &destinations{inflight: map[string]int{}, failing: map[string]destFailure{}}
}

// acquire takes a slot of dest, or says until when its deliveries wait.
func (d *destinations) acquire(dest string, now time.Time) (ok bool, wait time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, bad := d.failing[dest]; bad && now.Before(f.until) {
		return false, f.until
	}
	if d.inflight[dest] >= webhookPerDest {
		jitter := time.Duration(rand.Int64N(int64(webhookDeferred) / 2))
		return false, now.Add(webhookDeferred + jitter)
	}
	d.inflight[dest]++
	return true, time.Time{}
}

// release returns dest's slot with the outcome of its delivery.
func (d *destinations) release(dest string, failed bool, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inflight[dest]--; d.inflight[dest] <= 0 {
		delete(d.inflight, dest)
	}
	if !failed {
		delete(d.failing, dest)
		return
	}
	f := d.failing[dest]
	f.fails++
	f.until = now.Add(min(time.Second<<min(f.fails-1, 10), webhookDestBackoffMax))
	d.failing[dest] = f
	if len(d.failing) > 10000 { // forget destinations long past their back-off
		for k, v := range d.failing {
			if now.Sub(v.until) > 10*time.Minute {
				delete(d.failing, k)
			}
		}
	}
}

// destOf is the host:port a webhook URL dials.
func destOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
