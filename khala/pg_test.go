package khala

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

func pgQueryInt(t *testing.T, dsn, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func pgExec(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Replicas starting together on an empty database migrate it once; a
// restart finds nothing to do; a schema newer than the binary is refused
// and left as it is.
func TestPostgresMigrations(t *testing.T) {
	dsn := pgtest.Database(t)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := OpenPostgres(t.Context(), PostgresOptions{DSN: dsn, PoolSize: 2})
			if err == nil {
				p.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	want := SchemaVersion()
	if got := pgQueryInt(t, dsn, "SELECT count(*) FROM khala_schema"); got != want {
		t.Fatalf("%d schema rows after five concurrent starts, want %d", got, want)
	}
	openPG(t, dsn).Close() // a restart
	if got := pgQueryInt(t, dsn, "SELECT count(*) FROM khala_schema"); got != want {
		t.Fatalf("a restart re-applied migrations: %d rows", got)
	}
	pgExec(t, dsn, "INSERT INTO khala_schema (version, name) VALUES (99, 'from_the_future')")
	_, err := OpenPostgres(t.Context(), PostgresOptions{DSN: dsn})
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("a newer schema: %v", err)
	}
	t.Logf("refused: %v", err)
	if got := pgQueryInt(t, dsn, "SELECT max(version) FROM khala_schema"); got != 99 {
		t.Fatalf("the refusal changed the version table: %d", got)
	}
}

func TestLoadMigrations(t *testing.T) {
	ms, err := loadMigrations(migrationFiles)
	if err != nil || len(ms) == 0 || ms[0].version != 1 || ms[0].name != "init" {
		t.Fatalf("embedded migrations: %v %+v", err, ms)
	}
	for _, bad := range []fstest.MapFS{
		{"migrations/001_a.sql": {}, "migrations/003_c.sql": {}},
		{"migrations/002_b.sql": {}},
		{"migrations/x_a.sql": {}},
	} {
		if _, err := loadMigrations(bad); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

// The password never shows: not in what a bad or unreachable DSN says,
// not in the display form, not in what a wrong password says.
func TestPostgresDSNSecrets(t *testing.T) {
	c := pgtest.Need(t)
	const right, wrong = "right-pass-1x9", "wrong-pass-7q2"
	role := fmt.Sprintf("khala_pw_%d", time.Now().UnixNano())
	if err := c.Exec(t.Context(), fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, right)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	port := c.Port()
	for _, tc := range []struct {
		dsn  string
		want error
	}{
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", role, wrong, port), ErrUnavailable},
		{fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=postgres sslmode=disable", port, role, wrong), ErrUnavailable},
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", role, wrong), ErrUnavailable},
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:notaport/postgres", role, wrong), ErrBadDSN},
		{fmt.Sprintf("host=127.0.0.1 port=http user=%s password=%s", role, wrong), ErrBadDSN},
		{fmt.Sprintf("postgres://%s:%s@[::1/postgres", role, wrong), ErrBadDSN},
	} {
		_, err := OpenPostgres(t.Context(), PostgresOptions{DSN: tc.dsn})
		if !errors.Is(err, tc.want) || strings.Contains(err.Error(), wrong) {
			t.Errorf("%s: want %v without the password, got %v", DisplayDSN(tc.dsn), tc.want, err)
		}
		if d := DisplayDSN(tc.dsn); strings.Contains(d, wrong) {
			t.Errorf("display %q shows the password", d)
		}
		t.Logf("%v", err)
	}
	// The right password opens it, and its display hides it.
	dsn := fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", role, right, port)
	if err := c.Exec(t.Context(), "GRANT CREATE ON SCHEMA public TO "+role); err != nil {
		t.Fatal(err)
	}
	name, _, err := c.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DropDatabase(context.Background(), name) })
	c.Exec(t.Context(), fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", name, role))
	dsn = strings.Replace(dsn, "/postgres?", "/"+name+"?", 1)
	p := openPG(t, dsn)
	if d := p.Display(); strings.Contains(d, right) || !strings.Contains(d, role+"@127.0.0.1") {
		t.Fatalf("display: %q", d)
	}
}

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
	store, err := OpenPostgres(t.Context(), PostgresOptions{DSN: viaProxy, PoolSize: 4, Logger: logger})
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
