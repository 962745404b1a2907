package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream is a model endpoint on loopback that records each request's
// secret header and streams three events back.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	headers []string
}

func startUpstream(t *testing.T, tlsToo bool) *upstream {
	u := &upstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.headers = append(u.headers, r.Host+" "+r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	})
	if tlsToo {
		u.Server = httptest.NewTLSServer(h)
	} else {
		u.Server = httptest.NewServer(h)
	}
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.headers...)
}

// testProxy serves a proxy admitting allow on a socket of t's own and
// returns it with its log and the hosts it refused.
type testProxy struct {
	*Proxy
	socket  string
	log     *bytes.Buffer
	mu      sync.Mutex
	refused []string
}

func startProxy(t *testing.T, allow []string, secrets []Secret, tlsConf *tls.Config) *testProxy {
	t.Helper()
	pol, err := NewPolicy(allow)
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{socket: filepath.Join(t.TempDir(), "proxy.sock"), log: &bytes.Buffer{}}
	var logMu sync.Mutex
	tp.Proxy, err = Listen(tp.socket, Options{Policy: pol, Secrets: secrets, TLS: tlsConf,
		Log:     slog.New(slog.NewTextHandler(lockedWriter{&logMu, tp.log}, nil)),
		Refused: func(h string) { tp.mu.Lock(); tp.refused = append(tp.refused, h); tp.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	return tp
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// connect sends CONNECT target over the socket and returns the answer's
// status and the connection.
func (tp *testProxy) connect(t *testing.T, target string) (int, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", tp.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, c, br
}

func TestProxyConnectAdmitsTheAllowList(t *testing.T) {
	up := startUpstream(t, false)
	host := strings.TrimPrefix(up.URL, "http://")
	tp := startProxy(t, []string{host}, nil, nil)

	code, c, br := tp.connect(t, host)
	if code != http.StatusOK {
		t.Fatalf("CONNECT %s: %d, want 200", host, code)
	}
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	body, _ := io.ReadAll(br)
	if !strings.Contains(string(body), "data: 2") {
		t.Fatalf("no stream through the tunnel:\n%s", body)
	}

	_, port, _ := net.SplitHostPort(host)
	for _, refused := range []string{"127.0.0.1:1", "localhost:" + port, "example.com:443"} {
		if code, _, _ := tp.connect(t, refused); code != http.StatusForbidden {
			t.Errorf("CONNECT %s: %d, want 403", refused, code)
		}
	}
	tp.connect(t, "example.com:443") // a second refusal: counted, not logged again
	if got := strings.Join(tp.refused, " "); got != "127.0.0.1 localhost example.com example.com" {
		t.Errorf("refusals counted: %q", got)
	}
	if n := strings.Count(tp.log.String(), "host=example.com:443"); n != 1 {
		t.Errorf("example.com logged %d times, want once:\n%s", n, tp.log)
	}
}

func TestProxyPlainHTTPAddsTheSecret(t *testing.T) {
	up := startUpstream(t, false)
	host := strings.TrimPrefix(up.URL, "http://")
	tp := startProxy(t, []string{host}, []Secret{{Host: "127.0.0.1", Header: "x-api-key", Value: "s3cret"}}, nil)
	pu, _ := url.Parse("http://proxy.invalid")
	cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu),
		DialContext: func(context.Context, string, string) (net.Conn, error) { return net.Dial("unix", tp.socket) }}}

	resp, err := cl.Get(up.URL + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "data: 2") {
		t.Fatalf("GET through the proxy: %s\n%s", resp.Status, body)
	}
	if got := up.seen(); len(got) != 1 || got[0] != host+" s3cret|" {
		t.Errorf("upstream saw %q, want the secret as x-api-key", got)
	}

	resp, err = cl.Get("http://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET example.com: %s, want 403", resp.Status)
	}
}

func TestProxyTunnelToASecretHostIsForwarded(t *testing.T) {
	// A CONNECT to a host with a secret that the client then speaks plain
	// http in: the proxy serves it at the HTTP level and sets the header,
	// replacing the placeholder the agent sent.
	up := startUpstream(t, false)
	host := strings.TrimPrefix(up.URL, "http://")
	tp := startProxy(t, []string{host}, []Secret{{Host: host, Value: "tok"}}, nil)
	code, c, br := tp.connect(t, host)
	if code != 200 {
		t.Fatalf("CONNECT: %d", code)
	}
	for range 2 { // two requests on one tunnel
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer placeholder\r\n\r\n", host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := up.seen(); len(got) != 2 || got[0] != host+" |Bearer tok" {
		t.Errorf("upstream saw %q, want Authorization: Bearer tok twice", got)
	}
}

// TestProxyCloseEndsHalfClosedTunnels: a tunnel whose client has gone
// but whose server never answers ends when the proxy closes (at the end
// of the turn), not never.
func TestProxyCloseEndsHalfClosedTunnels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // holds it open, says nothing
		}
	}()
	tp := startProxy(t, []string{ln.Addr().String()}, nil, nil)
	code, c, _ := tp.connect(t, ln.Addr().String())
	if code != 200 {
		t.Fatalf("CONNECT: %d", code)
	}
	c.(*net.UnixConn).CloseWrite()
	done := make(chan struct{})
	go func() { tp.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for a tunnel whose server never ends")
	}
}
