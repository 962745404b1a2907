package khala

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The console's figures, each beside a baseline measured in the same run:
//
//	go test ./khala -run '^$' -bench Console -benchtime 200x
//
// Page renders are the handler's own time (no network): the console's
// page against the API's JSON of the same data.

// signedIn returns the server's handler and a request maker carrying a
// signed-in session.
func signedIn(b *testing.B, ts *testServer) (http.Handler, func(path string) *http.Request) {
	h := ts.srv.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/signin", nil))
	pre := rec.Result().Cookies()
	m := csrfRE.FindStringSubmatch(rec.Body.String())
	req := httptest.NewRequest("POST", "/signin", strings.NewReader(url.Values{"csrf": {m[1]}, "token": {testPerson}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range pre {
		req.AddCookie(c)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		b.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	session := rec.Result().Cookies()
	return h, func(path string) *http.Request {
		r := httptest.NewRequest("GET", path, nil)
		for _, c := range session {
			r.AddCookie(c)
		}
		return r
	}
}

// serve runs one request through h and checks its status.
func serve(b *testing.B, h http.Handler, r *http.Request, bearer string) int {
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 200 {
		b.Fatalf("%s: %d %s", r.URL, rec.Code, rec.Body)
	}
	return rec.Body.Len()
}

func answerTurns(b *testing.B, a *client, n int) {
	for i := range n {
		tk := a.claimOne()
		content := fmt.Sprintf("Turn %d: reviewed the change; two nits in lease.go (the renewal jitter and a log line), otherwise fine. <b>ok</b>", i+1)
		if s, d := a.respond(tk, content, map[string]any{"verdict": "approve", "n": i}); s != 200 {
			b.Fatalf("%d %s", s, d)
		}
	}
}

func BenchmarkConsoleThreadPage1000Messages(b *testing.B) {
	ts := newTestServer(b, withPerson)
	a := ts.agent("a")
	a.putWorkflow(relayWF)
	id := a.start("relay", map[string]any{"turns": 1001}, "")
	answerTurns(b, a, 1000)
	h, get := signedIn(b, ts)
	for _, enc := range []string{"", "gzip"} {
		b.Run("console"+map[string]string{"gzip": "-gzip"}[enc], func(b *testing.B) {
			var size int
			for b.Loop() {
				r := get("/threads/" + id)
				r.Header.Set("Accept-Encoding", enc)
				size = serve(b, h, r, "")
			}
			b.ReportMetric(float64(size)/1024, "KB/page")
		})
	}
	b.Run("baseline-api-messages-and-trace-json", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, httptest.NewRequest("GET", "/v1/threads/"+id+"/messages", nil), a.token)
			serve(b, h, httptest.NewRequest("GET", "/v1/threads/"+id+"/trace", nil), a.token)
		}
	})
}

func BenchmarkConsoleThreadsList10000(b *testing.B) {
	ts := newTestServer(b, withPerson)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 10000; i += 16 {
				a.start("pair", map[string]any{"turns": 2}, "")
			}
		})
	}
	wg.Wait()
	h, get := signedIn(b, ts)
	b.Run("console-first-page", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, get("/"), "")
		}
	})
	b.Run("console-first-page-recounting-in-background", func(b *testing.B) {
		defer func(d time.Duration) { countsTTL = d }(countsTTL)
		countsTTL = 0
		for b.Loop() {
			serve(b, h, get("/"), "")
		}
	})
	b.Run("status-count-of-10000", func(b *testing.B) {
		src := &consoleSource{s: ts.srv}
		for b.Loop() {
			if _, _, err := src.recount(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-api-threads-50", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, httptest.NewRequest("GET", "/v1/threads?limit=50", nil), a.token)
		}
	})
}

// BenchmarkConsoleLiveAnswer measures, in headless Chromium, the time from
// an agent's answer being acknowledged (its response returned 200) to the
// open thread page showing it; the baseline is loading the page afresh
// after the answer.
func BenchmarkConsoleLiveAnswer(b *testing.B) {
	ctx := newChrome(b)
	ts := newTestServer(b, withPerson)
	a := ts.agent("a")
	a.putWorkflow(relayWF)
	id := a.start("relay", map[string]any{"turns": 100000}, "")
	run(b, ctx, "sign in", signInActions(ts.URL, testPerson))
	step := 0
	measure := func(b *testing.B, reload bool) {
		var lat []time.Duration
		run(b, ctx, "open", chromedp.Navigate(ts.URL+"/threads/"+id), chromedp.WaitVisible(css("#summary")))
		for b.Loop() {
			step++
			tk := a.claimOne()
			if s, d := a.respond(tk, fmt.Sprintf("answer %d", step), nil); s != 200 {
				b.Fatalf("%d %s", s, d)
			}
			start := time.Now()
			sel := css(fmt.Sprintf("#step-%d", step))
			if reload {
				run(b, ctx, "reload", chromedp.Navigate(ts.URL+"/threads/"+id), chromedp.WaitVisible(sel, chromedp.RetryInterval(time.Millisecond)))
			} else {
				run(b, ctx, "wait", chromedp.WaitVisible(sel, chromedp.RetryInterval(time.Millisecond)))
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
	}
	b.Run("live", func(b *testing.B) { measure(b, false) })
	b.Run("baseline-reload", func(b *testing.B) { measure(b, true) })
}

// BenchmarkConsoleFirstLoad sums what a first load of a thread page (of
// 20 and of 1,000 messages) transfers; the baseline is the API's JSON of
// the same thread (thread, messages, trace).
func BenchmarkConsoleFirstLoad(b *testing.B) {
	for _, n := range []int{20, 1000} {
		b.Run(fmt.Sprintf("%d-messages", n), func(b *testing.B) { benchFirstLoad(b, n) })
	}
}

func benchFirstLoad(b *testing.B, messages int) {
	ctx := newChrome(b)
	ts := newTestServer(b, withPerson)
	a := ts.agent("a")
	a.putWorkflow(relayWF)
	id := a.start("relay", map[string]any{"turns": messages + 1}, "")
	answerTurns(b, a, messages)
	run(b, ctx, "sign in", signInActions(ts.URL, testPerson))
	b.Run("console", func(b *testing.B) {
		var kb float64
		for b.Loop() {
			kb = firstLoadKB(b, ctx, ts.URL+"/threads/"+id)
		}
		b.ReportMetric(kb, "KB/load")
	})
	b.Run("baseline-api-json", func(b *testing.B) {
		var n int
		for b.Loop() {
			n = 0
			for _, p := range []string{"", "/messages", "/trace"} {
				_, body := a.do("GET", "/v1/threads/"+id+p, nil)
				n += len(body)
			}
		}
		b.ReportMetric(float64(n)/1024, "KB/load")
	})
}
