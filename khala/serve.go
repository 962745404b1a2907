package khala

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khalabolt"
	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"
)

// ServeOptions configure Serve.
type ServeOptions struct {
	Addr string // host:port; port 0 picks a free one
	DB   string // the bbolt file
	// Postgres, when set, serves from this PostgreSQL database instead of
	// DB, as one of any number of replicas (no admin file is written).
	Postgres string
	// PoolSize bounds the PostgreSQL connections (khalapg.DefaultPoolSize).
	PoolSize int
	Version  string
	Logger   *slog.Logger
	// Ready is called with the server's base URL once it accepts
	// requests.
	Ready func(url string)
	// ShutdownGrace bounds the wait for in-flight requests. Default 30s.
	ShutdownGrace time.Duration
	// Server tunes the API; Store, Version, Logger and AdminToken are set
	// by Serve.
	Server Options
}

// Serve runs a Khala server on a bbolt file (or on PostgreSQL) until ctx
// ends, then shuts down gracefully: long polls and event streams end at
// once, in-flight requests finish, background work stops, the database is
// closed.
//
// It listens before opening the database (a taken port fails fast). On
// bbolt it writes the admin file (AdminFile) that lets `nerve khala
// enroll-token` reach it while it holds the database's lock; PostgreSQL
// has no such lock, and enroll-token writes there directly.
func Serve(ctx context.Context, o ServeOptions) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	if o.Postgres == "" {
		if err := os.MkdirAll(filepath.Dir(o.DB), 0o700); err != nil {
			return fmt.Errorf("create the database's directory: %w", err)
		}
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	defer ln.Close()
	url := "http://" + loopbackAddr(ln.Addr().(*net.TCPAddr))
	var (
		store     khaladb.Storage
		adminHash khaladb.Hash
		where     = []any{"db", o.DB}
	)
	if o.Postgres != "" {
		pg, err := khalapg.Open(ctx, khalapg.Options{DSN: o.Postgres, PoolSize: o.PoolSize, Logger: o.Logger})
		if err != nil {
			return err
		}
		store, where = pg, []any{"postgres", pg.Display(), "pool", pg.PoolSize()}
	} else {
		b, err := khalabolt.Open(o.DB, time.Second)
		if errors.Is(err, khaladb.ErrLocked) {
			return fmt.Errorf("%w (another nerve khala serve?)", err)
		}
		if err != nil {
			return err
		}
		store = b
		adminTok, h := newToken(prefixAdmin)
		adminPath := AdminFile(o.DB)
		if err := writeAdminFile(adminPath, adminInfo{URL: url, Token: adminTok, PID: os.Getpid()}); err != nil {
			b.Close()
			return err
		}
		defer removeAdminFile(adminPath, adminTok)
		adminHash = h
	}
	defer store.Close()

	so := o.Server
	so.Store, so.Version, so.Logger, so.AdminToken = store, o.Version, o.Logger, adminHash
	srv := New(so)
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	// Background work outlives ctx until the HTTP side has drained, so a
	// response committed during shutdown still gets its webhook queued.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Run(workCtx) }()
	defer func() { stopWork(); wg.Wait() }()

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	o.Logger.Info("khala serving", append(append([]any{"url", url}, where...), "version", o.Version)...)
	if o.Ready != nil {
		o.Ready(url)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	o.Logger.Info("khala shutting down", "grace", o.ShutdownGrace)
	srv.BeginShutdown()
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		o.Logger.Warn("in-flight requests cut off at the end of the grace period", "err", err)
		hs.Close()
	}
	return nil
}

// loopbackAddr is how a local client reaches a listener: a wildcard host
// becomes loopback.
func loopbackAddr(a *net.TCPAddr) string {
	ip := a.IP
	if ip == nil || ip.IsUnspecified() {
		if ip.To4() == nil && ip != nil {
			ip = net.IPv6loopback
		} else {
			ip = net.IPv4(127, 0, 0, 1)
		}
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(a.Port))
}
