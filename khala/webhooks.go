package khala

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Webhook delivery runs beside the queue, never in it: events put their
// webhooks in the storage outbox in the same commit, and this loop posts
// them with bounded concurrency, per destination too (webhook_dest.go), so
// a slow or dead receiver delays only its own notifications. Delivery is
// at least once; receivers dedupe by the X-Khala-Delivery header.
const (
	// webhookWorkers bounds deliveries in flight, all destinations
	// together: each takes a goroutine and a connection, for
	// webhookResponseTimeout at most.
	webhookWorkers = 64
	// webhookLease keeps a delivery from being taken twice while it is
	// in flight; past it (a crashed deliverer) it is tried again.
	webhookLease = time.Minute
)

func (s *Server) runWebhooks(ctx context.Context) {
	sem := make(chan struct{}, webhookWorkers)
	dests := newDestinations()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		hint := s.store.Changed(khaladb.TopicWebhooks)
		now := s.now()
		free := webhookWorkers - len(sem)
		var (
			hooks []khaladb.Webhook
			next  time.Time
			err   error
		)
		if free > 0 {
			hooks, next, err = s.store.ClaimWebhooks(ctx, now, webhookLease, free)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, khaladb.ErrUnavailable) { // the storage logged it once
				s.log.Error("webhooks: read the outbox", "err", err)
			}
			next = now.Add(time.Second)
		}
		for _, h := range hooks {
			dest := destOf(h.URL)
			if ok, until := dests.acquire(dest, now); !ok {
				// Its destination is busy or backing off: it waits, not a
				// worker, and the wait is not an attempt.
				if err := s.store.FinishWebhook(context.WithoutCancel(ctx), h.ID, h.Attempts, until, h.LastErr); err != nil {
					s.log.Error("webhooks: defer delivery", "id", h.ID, "err", err)
				}
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				failed := !s.deliver(ctx, h)
				dests.release(dest, failed, s.now())
			}()
		}
		if free > 0 && len(hooks) == free {
			continue // more may be due now
		}
		wait := s.opts.Recheck
		if !next.IsZero() {
			wait = max(min(wait, time.Until(next)), time.Millisecond)
		}
		if free <= 0 {
			wait = min(wait, 50*time.Millisecond) // every worker busy: look again soon
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-hint:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// deliver posts one webhook and records the outcome; true: delivered.
func (s *Server) deliver(ctx context.Context, h khaladb.Webhook) bool {
	attempts := h.Attempts + 1
	reason, refused := s.post(ctx, h)
	// The outcome is recorded even when shutdown cancelled the post.
	fctx := context.WithoutCancel(ctx)
	var err error
	switch {
	case reason == "":
		s.metrics.webhooksSent.Add(1)
		err = s.store.FinishWebhook(fctx, h.ID, attempts, time.Time{}, "")
	case attempts >= s.opts.WebhookAttempts || refused:
		s.metrics.webhooksDropped.Add(1)
		s.log.Warn("webhook given up", "thread", h.Payload.Thread, "event", h.Payload.Event,
			"host", hostOf(h.URL), "attempts", attempts, "err", reason)
		err = s.store.FinishWebhook(fctx, h.ID, attempts, time.Time{}, reason)
	default:
		s.metrics.webhooksFailed.Add(1)
		wait := s.opts.WebhookBackoff(attempts)
		wait += time.Duration(rand.Int64N(int64(wait)/10 + 1)) // jitter: receivers recovering are not stampeded
		s.log.Debug("webhook failed; will retry", "thread", h.Payload.Thread, "host", hostOf(h.URL),
			"attempt", attempts, "retry_in", wait, "err", reason)
		err = s.store.FinishWebhook(fctx, h.ID, attempts, s.now().Add(wait), reason)
	}
	if err != nil {
		s.log.Error("webhooks: record delivery", "id", h.ID, "err", err)
	}
	return reason == ""
}

// post sends h once; "" means the receiver answered 2xx, refused that
// the policy (webhook_policy.go) forbids its destination.
func (s *Server) post(ctx context.Context, h khaladb.Webhook) (reason string, refused bool) {
	body, err := json.Marshal(h.Payload)
	if err != nil {
		return err.Error(), false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return err.Error(), false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "khala/"+s.opts.Version)
	req.Header.Set("X-Khala-Event", h.Payload.Event)
	req.Header.Set("X-Khala-Delivery", strconv.FormatUint(h.ID, 10))
	resp, err := s.webhooks.Do(req)
	if err != nil {
		return err.Error(), errors.Is(err, errWebhookRefused)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Sprintf("receiver answered %s", resp.Status), false
	}
	return "", false
}

// hostOf is what logs show of a webhook URL: its path or query may carry
// the receiver's secret.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	return u.Host
}

// noRedirects keeps a POST from turning into a GET on a 30x: the
// receiver must answer 2xx itself.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
