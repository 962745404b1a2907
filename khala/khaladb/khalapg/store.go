package khalapg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is the Storage of several stateless replicas over one
// PostgreSQL database. Every replica may serve every request: what one
// replica commits, the others read; the only per-replica state is wake-up
// hints (carried between replicas by LISTEN/NOTIFY, see notify.go) and
// caches: of immutable records (messages, agents), and of the view a claim
// read of its thread, which the thread's next change may use once, checked
// by the database as it is written (fastpath.go).
//
// Concurrency rests on row locks, taken in one order so that no two
// transactions wait for each other in a cycle: a thread row (UpdateThread,
// FOR NO KEY UPDATE, or the first write of a change made from a claim's
// view), then its open turns, then its event counter. Claim locks a turn
// and its thread's counter together with SKIP LOCKED and so never waits at
// all; Heartbeat locks one turn. See queue.go.
type Store struct {
	pool    *pgxpool.Pool
	cfg     *pgxpool.Config
	log     *slog.Logger
	display string // the DSN without its password, for logs
	secret  string // the password, scrubbed from every error

	hints   *khaladb.Hints
	notify  *pgNotifier
	msgs    shared.Messages
	agents  shared.Agents
	revokes atomic.Uint64 // grows with every revoke heard: see AgentByToken
	views   claimViews
	batches claimBatches
	changes changeBatches

	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	opened atomic.Bool // outages are logged from here on; before, the caller reports them
	down   atomic.Bool // the last operation found the database unreachable
}

// Options configure Open.
type Options struct {
	// DSN is a libpq connection string or URL. PGPASSWORD and ~/.pgpass
	// are honoured, which keeps the password out of the command line.
	DSN string
	// PoolSize is the most connections the replica opens for requests
	// (two more carry notifications). Default 10.
	PoolSize int
	Logger   *slog.Logger
}

// DefaultPoolSize is a replica's connection pool when none is given.
const DefaultPoolSize = 10

// ErrBadDSN says a connection string could not be parsed.
var ErrBadDSN = errors.New("bad PostgreSQL connection string")

// Open connects to the database, brings its schema up to date
// (refusing one newer than this binary knows: ErrSchemaTooNew) and starts
// listening for other replicas' changes.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PoolSize <= 0 {
		o.PoolSize = DefaultPoolSize
	}
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		// pgx redacts the password it recognises; the message names no
		// input at all, to be sure.
		return nil, fmt.Errorf("%w: %s", ErrBadDSN, parseErrReason(err))
	}
	cfg.MaxConns = int32(o.PoolSize)
	cfg.AfterConnect = warmClaims
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "nerve-khala"
	// Every statement here is a short lookup or write: compiling one (JIT)
	// would cost more than running it, and the claim's plan (queue.go)
	// looks expensive enough to trigger it.
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
	// Every statement is prepared once per connection (pgx's statement
	// cache) and its plan is wanted once too: planned per execution,
	// a change's CTEs cost the database more than running them. Each
	// statement reads by key or walks an index in its own order, so no
	// plan here wants a sort or a bitmap; forbidding them matters for the
	// claim (queue.go): planned from a queue's lagging statistics, it
	// would fetch and sort the whole queue instead of walking its index.
	// Set at connect, these cost no statement per request.
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.RuntimeParams["enable_sort"] = "off"
	cfg.ConnConfig.RuntimeParams["enable_bitmapscan"] = "off"
	p := &Store{cfg: cfg, log: o.Logger, display: DisplayDSN(o.DSN), secret: cfg.ConnConfig.Password,
		hints: khaladb.NewHints()}
	if p.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, p.fail("open the pool", err)
	}
	if err := p.pool.Ping(ctx); err != nil {
		p.pool.Close()
		return nil, p.fail("connect", err)
	}
	if err := p.migrate(ctx); err != nil {
		p.pool.Close()
		return nil, err
	}
	p.checkDurability(ctx)
	p.notify = newPGNotifier(p)
	lctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	listener, err := p.dialListener(ctx)
	if err != nil {
		stop()
		p.pool.Close()
		return nil, err
	}
	notifier, err := p.notify.dial(ctx)
	if err != nil {
		listener.Close(context.Background())
		stop()
		p.pool.Close()
		return nil, err
	}
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.listen(lctx, listener) }()
	go func() { defer p.wg.Done(); p.notify.run(lctx, notifier) }()
	p.opened.Store(true)
	return p, nil
}

// checkDurability warns when the server acknowledges commits it has not
// flushed: the API answers 200 only for what survives a crash.
func (p *Store) checkDurability(ctx context.Context) {
	var sc, fsync string
	if err := p.pool.QueryRow(ctx, "SELECT current_setting('synchronous_commit'), current_setting('fsync')").Scan(&sc, &fsync); err != nil {
		return
	}
	if sc == "off" || fsync == "off" {
		p.log.Warn("the database acknowledges commits before they are on disk: a crash of it can lose answers agents were told were kept",
			"db", p.display, "synchronous_commit", sc, "fsync", fsync)
	}
}

// PoolSize is the most connections the store opens for requests.
func (p *Store) PoolSize() int { return int(p.cfg.MaxConns) }

// Display is the database the store uses, without the password.
func (p *Store) Display() string { return p.display }

// Close stops listening and closes the pool; requests in flight finish
// first (the pool waits for connections in use).
func (p *Store) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.stop()
	p.wg.Wait()
	p.pool.Close()
	return nil
}

// Ping implements Storage.
func (p *Store) Ping(ctx context.Context) error {
	return p.fail("ping the database", p.pool.Ping(ctx))
}

// Changed implements Storage.
func (p *Store) Changed(topic string) <-chan struct{} { return p.hints.Wait(topic) }

// fail words a database error for the caller: unreachable becomes
// ErrUnavailable (503, retry) and is logged once per outage; the password
// never appears. nil stays nil, and marks the database reachable.
func (p *Store) fail(op string, err error) error {
	if err == nil {
		if p.down.Load() && p.down.CompareAndSwap(true, false) {
			p.log.Info("database reachable again", "db", p.display)
		}
		return nil
	}
	switch {
	case p.closed.Load():
		return fmt.Errorf("%s: %w", op, khaladb.ErrClosed)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, err)
	case unreachable(err):
		if !p.down.Swap(true) && p.opened.Load() {
			p.log.Warn("database unreachable; answering 503 until it is back", "db", p.display, "err", p.scrub(err))
		}
		return fmt.Errorf("%s: %w: %s", op, khaladb.ErrUnavailable, p.scrub(err))
	}
	return &scrubbedError{op: op, err: err, secret: p.secret}
}

func (p *Store) scrub(err error) string { return scrubSecret(err.Error(), p.secret) }

// scrubbedError keeps a database error (for errors.As) while its message
// never shows the password.
type scrubbedError struct {
	op     string
	err    error
	secret string
}

func (e *scrubbedError) Error() string { return e.op + ": " + scrubSecret(e.err.Error(), e.secret) }
func (e *scrubbedError) Unwrap() error { return e.err }

func scrubSecret(s, secret string) string {
	if secret == "" {
		return s
	}
	s = strings.ReplaceAll(s, secret, "xxxxx")
	return strings.ReplaceAll(s, url.QueryEscape(secret), "xxxxx")
}

// unreachable reports whether err says the database cannot be reached,
// as opposed to refusing a statement.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true // whatever the reason: a refused password too is no connection
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutting down, crashed, starting
			pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// parseErrReason is why a DSN did not parse: pgx's own words, without
// the DSN and without the underlying error (a URL parse error quotes the
// URL, password and all).
func parseErrReason(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "cannot parse it"
	}
	msg := pe.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	}
	if inner := pe.Unwrap(); inner != nil {
		msg = strings.TrimSuffix(msg, " ("+inner.Error()+")")
	}
	return msg
}

// DisplayDSN is how logs and messages show a connection string: user,
// host, port and database, never the password.
func DisplayDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	host := cfg.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, fmt.Sprint(cfg.Port))
	}
	return fmt.Sprintf("postgres://%s@%s/%s", cfg.User, host, cfg.Database)
}

// tx runs fn in a transaction and commits it; fn returning an error (or
// errStale) rolls it back.
func (p *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}
