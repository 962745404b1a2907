package khala

import (
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/tarpit"
)

// loopbackWebhooks lets the tests' receivers, on 127.0.0.1, hear from
// the servers the harness starts.
var loopbackWebhooks, _ = ParseWebhookAllow([]string{"127.0.0.1"})

func defaultWebhookPolicy(o *Options) { o.WebhookAllow = WebhookAllow{} }

// By default a thread may not name a webhook on loopback, link-local
// (cloud metadata) or this machine; private ranges are a team's LAN and
// stay allowed; --webhook-allow widens it.
func TestWebhookRefusedByDefault(t *testing.T) { eachBackend(t, testWebhookRefusedByDefault) }

func testWebhookRefusedByDefault(t *testing.T, bk backend) {
	ts := bk.server(t, defaultWebhookPolicy)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	for url, why := range map[string]string{
		"http://127.0.0.1:8080/hook":               "127.0.0.1 is a loopback address",
		"http://127.9.9.9/hook":                    "loopback",
		"http://[::1]:7700/v1/threads":             "::1 is a loopback address",
		"http://[::ffff:127.0.0.1]/x":              "loopback",
		"http://169.254.169.254/latest/meta-data/": "169.254.169.254 is link-local",
		"http://[fe80::1]/x":                       "link-local",
		"http://0.0.0.0:80/x":                      "unspecified",
		"http://localhost:9/x":                     "localhost resolves to",
	} {
		status, body := a.do("POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"turns": 0}, "webhook": url})
		if status != 400 || !strings.Contains(string(body), why) || !strings.Contains(string(body), "--webhook-allow") {
			t.Errorf("webhook %s: %d %s, want 400 naming %q", url, status, body, why)
		}
	}
	// This machine's own addresses, beyond loopback (a container's
	// 172.17.0.2, a host's LAN address), are refused too.
	for _, ip := range ownAddrs() {
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		url := "http://" + net.JoinHostPort(ip.String(), "7700") + "/x"
		if status, body := a.do("POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"turns": 0}, "webhook": url}); status != 400 || !strings.Contains(string(body), "this server's own address") {
			t.Errorf("webhook %s: %d %s, want 400: it is this machine", url, status, body)
		}
	}
	// turns 1: these threads do not end while the test runs, so nothing is
	// posted off this machine.
	for _, url := range []string{"http://10.1.2.3/hook", "http://192.168.7.7:9000/hook", "https://203.0.113.5/hook"} {
		if status, body := a.do("POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"turns": 1}, "webhook": url}); status != 201 {
			t.Errorf("webhook %s: %d %s, want it accepted (private and public ranges stay allowed)", url, status, body)
		}
	}
	// What the operator allows, by network or by name, goes.
	wide, err := ParseWebhookAllow([]string{"127.0.0.0/8", "LocalHost"})
	if err != nil {
		t.Fatal(err)
	}
	ts2 := bk.server(t, func(o *Options) { o.WebhookAllow = wide })
	b := ts2.agent("b")
	b.putWorkflow(pairWF)
	for _, url := range []string{"http://127.0.0.1:8080/hook", "http://localhost:9/x"} {
		if status, body := b.do("POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"turns": 1}, "webhook": url}); status != 201 {
			t.Errorf("allowed webhook %s: %d %s", url, status, body)
		}
	}
	if _, err := ParseWebhookAllow([]string{"not a host!"}); err == nil {
		t.Error("a bad --webhook-allow entry must be refused")
	}
}

// The check at creation is not the only one: each delivery checks the
// address it dials, so a name that resolved elsewhere at creation and to
// loopback now (DNS rebinding) is not posted to. Here the creation check
// allows loopback while the deliverer keeps the default: what the deliverer
// sees is then what a rebound name gives it.
func TestWebhookDialRefused(t *testing.T) { eachBackend(t, testWebhookDialRefused) }

func testWebhookDialRefused(t *testing.T, bk backend) {
	ts := bk.server(t, defaultWebhookPolicy, fastBackoff)
	ts.srv.opts.WebhookAllow = loopbackWebhooks // before any request: creation lets it through
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	hook := newHookReceiver(t, 0)
	a.start("pair", map[string]any{"turns": 0}, hook.URL) // ends at once: its webhook is due
	waitFor(t, "the refused webhook to be given up", func() bool { return ts.srv.metrics.webhooksDropped.Load() == 1 })
	if n := hook.calls.Load(); n != 0 {
		t.Fatalf("the receiver on loopback got %d calls, want none", n)
	}
	if n := ts.srv.metrics.webhooksFailed.Load(); n != 0 {
		t.Fatalf("a refused destination was retried %d times; retrying cannot help", n)
	}
}

// Sixteen receivers that accept and never answer delay only their own
// webhooks: another thread's webhook arrives within a second of its
// event (p99 of samples spread over a delivery timeout and its retries).
func TestWebhookHungReceiversDelayOnlyTheirOwn(t *testing.T) {
	eachBackend(t, testWebhookHungReceivers)
}

func testWebhookHungReceivers(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	for range 2 { // two deliveries to each: more than their slots' worth, retried
		for range 16 {
			a.start("pair", map[string]any{"turns": 0}, "http://"+tarpit.Listen(t)+"/hook")
		}
	}
	var got atomic.Int64
	arrived := make(chan time.Time, 100)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		arrived <- time.Now()
	}))
	defer good.Close()
	const samples = 24
	var lags []time.Duration
	for range samples {
		sent := time.Now()
		a.start("pair", map[string]any{"turns": 0}, good.URL+"/hook") // ends at once: its event is now
		select {
		case at := <-arrived:
			lags = append(lags, at.Sub(sent))
		case <-time.After(30 * time.Second):
			t.Fatalf("no webhook within 30s behind 16 hung receivers (after %d samples)", len(lags))
		}
		time.Sleep(250 * time.Millisecond) // the samples span a 5s delivery timeout and retries
	}
	slices.Sort(lags)
	p99 := lags[(len(lags)*99+99)/100-1]
	t.Logf("webhook lag behind 16 hung receivers: p50 %s, p99 %s, max %s", lags[len(lags)/2], p99, lags[len(lags)-1])
	if p99 > time.Second {
		t.Fatalf("webhook p99 %s behind 16 hung receivers, want within 1s", p99)
	}
}
