package khala

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

// tcpProxy stands between a store and the database, so a test can take
// the database away (every connection dropped, new ones refused) and
// give it back, without stopping the shared cluster.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	up     bool
	conns  []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, up: true}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if !p.up {
				c.Close()
				p.mu.Unlock()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				p.mu.Unlock()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
}

// lockedBuffer collects a server's log.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A replica that loses its database answers 503 with the error shape,
// health included, and recovers by itself; the password is in no log
// line and no answer.
func TestPostgresOutage(t *testing.T) {
	c := pgtest.Need(t)
	const secret = "pw-9Zk-secret"
	dsn := pgtest.Database(t) // the superuser: trusted from loopback, any password goes
	name := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	proxy := newTCPProxy(t, fmt.Sprintf("127.0.0.1:%d", c.Port()))
	viaProxy := fmt.Sprintf("postgres://postgres:%s@%s/%s?sslmode=disable&connect_timeout=2", secret, proxy.addr(), name)
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, &logWriter{t: t}), nil))
	store, err := khalapg.Open(t.Context(), khalapg.Options{DSN: viaProxy, PoolSize: 4, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := newServerOn(t, store, func(o *Options) { o.Logger = logger; o.Recheck = 200 * time.Millisecond })
	et, err := IssueEnrollToken(t.Context(), store, 10, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts.enroll = et.Token
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	anon := &client{ts: ts}
	anon.must("GET", "/v1/health", nil, 200, nil)

	proxy.cut()
	var bodies []string
	for _, req := range []struct{ method, path string }{{"GET", "/v1/health"}, {"POST", "/v1/turns/claim"}, {"GET", "/v1/threads/" + id}} {
		s, d := a.do(req.method, req.path, map[string]any{})
		if s != 503 || errCode(d) != codeUnavailable {
			t.Fatalf("%s %s without the database: %d %s", req.method, req.path, s, d)
		}
		bodies = append(bodies, string(d))
	}
	proxy.restore()
	waitFor(t, "health to recover", func() bool { s, _ := anon.do("GET", "/v1/health", nil); return s == 200 })
	tk := a.claimOne()
	if s, d := a.respond(tk, "after the outage", nil); s != 200 {
		t.Fatalf("respond after recovery: %d %s", s, d)
	}
	log := logs.String()
	if n := strings.Count(log, "database unreachable"); n != 1 {
		t.Errorf("want one 'database unreachable' line for one outage, got %d", n)
	}
	if !strings.Contains(log, "database reachable again") {
		t.Errorf("no recovery line in the log")
	}
	if strings.Contains(log, secret) || strings.Contains(strings.Join(bodies, ""), secret) {
		t.Fatalf("the password leaked:\n%s\n%s", log, bodies)
	}
}
