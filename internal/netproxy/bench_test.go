package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// streamEvents is the length of the streamed model answer: about what a
// short answer of a model streams as server-sent events.
const streamEvents = 64

// BenchmarkStreamedAnswer is the proxy's cost on a streamed model answer:
// a POST answered with streamEvents server-sent events, each flushed,
// read to its end, over a new connection each time (as a CLI's first
// request of a turn), directly ("direct", the baseline) and the way a
// sandboxed CLI reaches a loopback endpoint ("proxied": the bridge's
// forward, the unix socket, the proxy's CONNECT tunnel). p50-ms and
// p90-ms are per answer; the proxy's added latency is proxied's p50 less
// direct's.
func BenchmarkStreamedAnswer(b *testing.B) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range streamEvents {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"token %d \"}}\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	defer model.Close()
	host := strings.TrimPrefix(model.URL, "http://")
	pol, _ := NewPolicy([]string{host})
	sock := filepath.Join(b.TempDir(), "proxy.sock")
	p, err := Listen(sock, Options{Policy: pol})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	br := &Bridge{Socket: sock, Forwards: []Forward{{Listen: "127.0.0.1:0", Target: host}}}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	for _, c := range []struct{ name, addr string }{{"direct", host}, {"proxied", br.Addrs()[0]}} {
		b.Run(c.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := answer(c.addr); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			b.ReportMetric(percentile(took, 0.5), "p50-ms")
			b.ReportMetric(percentile(took, 0.9), "p90-ms")
		})
	}
}

// answer posts to addr over a new connection and reads the streamed
// answer to its end.
func answer(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", addr, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && (resp.StatusCode != 200 || n < streamEvents*50) {
		err = fmt.Errorf("answer: %s, %d bytes", resp.Status, n)
	}
	return err
}

func percentile(d []time.Duration, q float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1e6
}
