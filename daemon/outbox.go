package daemon

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/telemetry"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/store"
)

// outbox delivers responses written to nerve.db, until each is accepted
// (200) or refused for good (409: the claim was no longer ours; 403
// not_holder: the remote says it is another agent's; 404 or 400 with
// Khala's own code: the turn is unknown or the answer malformed), with
// backoff while a remote is down, and for the one response a remote
// refuses otherwise (a proxy's 404 during a redeploy). A restart resumes
// it from the store.
type outbox struct {
	d    *Daemon
	wake chan struct{}

	mu       sync.Mutex
	backoff  map[string]time.Time // remote -> not before
	fails    map[string]int
	held     map[uint64]time.Time // one response refused -> not before
	refusals map[uint64]int
	inflight map[uint64]bool // being sent by sendNow
}

func newOutbox(d *Daemon) *outbox {
	return &outbox{d: d, wake: make(chan struct{}, 1), backoff: map[string]time.Time{}, fails: map[string]int{},
		held: map[uint64]time.Time{}, refusals: map[uint64]int{}, inflight: map[uint64]bool{}}
}

// kick asks for a delivery round now.
func (o *outbox) kick(store.OutboxItem) {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run delivers until ctx is done.
func (o *outbox) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		o.flush(ctx)
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		case <-tick.C:
			if err := o.d.store.FlushDelivered(); err != nil {
				o.d.log.Error("outbox", "err", err)
			}
		}
	}
}

// flush tries every pending response once (skipping remotes in backoff)
// and reports how many are left.
func (o *outbox) flush(ctx context.Context) int {
	items, err := o.d.store.Outbox()
	if err != nil {
		o.d.log.Error("read outbox", "err", err)
		return 0
	}
	left := 0
	clients := map[string]*remote.Client{}
	for _, it := range items {
		if ctx.Err() != nil {
			return len(items)
		}
		o.mu.Lock()
		wait := max(time.Until(o.backoff[it.Remote]), time.Until(o.held[it.Seq]))
		busy := o.inflight[it.Seq]
		o.mu.Unlock()
		if wait > 0 || busy {
			left++
			continue
		}
		cl, ok := clients[it.Remote]
		if !ok {
			var err error
			if cl, err = remote.ForConfig(o.d.config(), it.Remote); err != nil {
				o.d.log.Error("outbox: remote gone; response kept", "remote", it.Remote, "turn", it.Turn, "err", err)
				left++
				continue
			}
			cl.Retries = 0
			clients[it.Remote] = cl
		}
		if _, err := cl.Respond(telemetry.WithTraceparent(ctx, it.Traceparent), it.Turn, it.Response); !o.settle(it, err) {
			left++
		}
	}
	return left
}

// sendNow delivers a response just queued, on the turn's own goroutine:
// the usual case costs no hand-off to the delivery loop. Whatever it
// cannot deliver stays in the outbox for the loop. It returns the
// server's acknowledgement when the response was accepted.
func (o *outbox) sendNow(trace context.Context, it store.OutboxItem) (remote.Answered, bool) {
	o.mu.Lock()
	if time.Until(o.backoff[it.Remote]) > 0 {
		o.mu.Unlock()
		o.kick(it)
		return remote.Answered{}, false
	}
	o.inflight[it.Seq] = true
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.inflight, it.Seq)
		o.mu.Unlock()
	}()
	cl, err := remote.ForConfig(o.d.config(), it.Remote)
	if err != nil {
		o.kick(it)
		return remote.Answered{}, false
	}
	cl.Retries = 0
	ctx, cancel := context.WithTimeout(trace, 30*time.Second)
	defer cancel()
	ans, err := cl.Respond(ctx, it.Turn, it.Response)
	if !o.settle(it, err) {
		o.kick(it)
	}
	return ans, err == nil
}

// settle records the outcome of one delivery and reports whether the item
// is done with (delivered, or refused for good).
func (o *outbox) settle(it store.OutboxItem, err error) bool {
	switch {
	case err == nil:
		o.d.log.Debug("response delivered", "remote", it.Remote, "turn", it.Turn, "thread", it.Thread)
	case remote.IsClaimLost(err):
		o.d.log.Info("response refused: the claim was no longer ours", "remote", it.Remote, "turn", it.Turn)
	case remote.IsNotHolder(err):
		// Retrying cannot help: the turn was leased to another agent name
		// (this agent's token for the remote changed since it claimed).
		o.d.log.Error("response refused: the turn is held by another agent; dropped", "remote", it.Remote, "turn", it.Turn, "err", err)
	case refusedForGood(err):
		o.d.log.Error("response undeliverable; dropped", "remote", it.Remote, "turn", it.Turn, "err", err)
	case remote.IsStatus(err, http.StatusNotFound), remote.IsStatus(err, http.StatusBadRequest):
		// Not Khala's word on the turn: this response waits, the
		// remote's others go on.
		o.hold(it, err)
		return false
	default:
		o.delay(it.Remote, err)
		return false
	}
	o.mu.Lock()
	delete(o.fails, it.Remote)
	delete(o.held, it.Seq)
	delete(o.refusals, it.Seq)
	o.mu.Unlock()
	o.d.store.Delivered(it.Seq)
	return true
}

// refusedForGood reports whether err is a 404 or 400 with Khala's own
// code: the turn or its thread does not exist, or the answer is
// malformed; sending it again cannot help.
func refusedForGood(err error) bool {
	var e *remote.Error
	if !errors.As(err, &e) {
		return false
	}
	switch {
	case e.Status == http.StatusNotFound:
		return e.Code == api.CodeNotFound
	case e.Status == http.StatusBadRequest:
		return e.Code == api.CodeBadRequest || e.Code == api.CodeInvalidInput
	}
	return false
}

// delay backs a remote off exponentially, logging the first failure only.
func (o *outbox) delay(remoteName string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.fails[remoteName]
	o.fails[remoteName] = n + 1
	if n == 0 {
		o.d.log.Warn("outbox: remote unavailable; responses kept and retried", "remote", remoteName, "err", err)
	}
	o.backoff[remoteName] = time.Now().Add(backoffAfter(n))
}

// hold backs one response off exponentially, logging its first refusal.
func (o *outbox) hold(it store.OutboxItem, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.refusals[it.Seq]
	o.refusals[it.Seq] = n + 1
	if n == 0 {
		o.d.log.Warn("outbox: response refused, not as a turn that is gone; kept and retried", "remote", it.Remote, "turn", it.Turn, "err", err)
	}
	o.held[it.Seq] = time.Now().Add(backoffAfter(n))
}

// backoffAfter is the jittered wait after n failures in a row: 125 ms
// to 250 ms at first, doubling up to 7.5 s to 15 s.
func backoffAfter(n int) time.Duration {
	d := min(time.Duration(1<<min(n, 6))*250*time.Millisecond, 15*time.Second)
	return d/2 + rand.N(d/2+1)
}

// drain tries to deliver everything within d (shutdown).
func (o *outbox) drain(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		o.mu.Lock()
		o.backoff, o.held = map[string]time.Time{}, map[uint64]time.Time{}
		o.mu.Unlock()
		if o.flush(ctx) == 0 || ctx.Err() != nil {
			_ = o.d.store.FlushDelivered()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
