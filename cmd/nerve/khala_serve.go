package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"

	"github.com/charmbracelet/log"
	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala"
	"github.com/nerve-agents/nerve/workflow"
)

// envKhalaPostgres gives the PostgreSQL DSN without putting its password
// on the command line, where every user of the machine can read it.
const envKhalaPostgres = "NERVE_KHALA_POSTGRES"

type khalaServeOptions struct {
	IO       *IOStreams
	Addr     string
	DB       string
	Postgres string
	PoolSize int
	LogLevel string
	Grace    time.Duration
	MaxBody  int64
	MaxWait  time.Duration
	MaxDepth int
	// WebhookAllow widens where webhooks may go (CIDR, IP or host).
	WebhookAllow []string
}

func newCmdKhalaServe(f *Factory, runF func(*khalaServeOptions) error) *cobra.Command {
	opts := &khalaServeOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Khala server on a bbolt file, or as a replica over PostgreSQL",
		Long: `nerve khala serve runs the Khala HTTP API v1 on one bbolt file (default
$NERVE_HOME/khala.db). One process holds the file; a second serve on it fails.

With --postgres DSN (or NERVE_KHALA_POSTGRES) it serves from a PostgreSQL
database instead, and any number of replicas may serve the same database
behind a load balancer: they share no state but the database. The schema is
created or migrated at start. Prefer the environment variable, PGPASSWORD or
~/.pgpass to a password in --postgres: a command line is visible to every
user of the machine. The password never appears in logs or errors.

Agents enroll with a token from 'nerve khala enroll-token', which works while
the server runs: on bbolt the server writes FILE.admin beside the database
(mode 0600, its URL and a local admin token) and the command asks it through
that; on PostgreSQL the command writes the token to the database itself.

SIGINT or SIGTERM shut it down gracefully: long polls end, requests in flight
finish (at most --grace), the database is closed. A second signal exits at once.

Webhooks (a thread's "webhook" URL) may not go to loopback, link-local
(169.254.0.0/16, where cloud metadata lives; fe80::/10), multicast or this
machine's own addresses: a thread creator must not reach through Khala what
only the serving machine can. Such a URL is refused when the thread is
created, and each delivery checks the address it dials. Private ranges
(10/8, 172.16/12, 192.168/16) are allowed. --webhook-allow CIDR|IP|HOST
(repeatable) allows more, e.g. --webhook-allow 127.0.0.1 for a receiver on
this machine.`,
		Example: `  nerve khala serve
  nerve khala serve --addr 0.0.0.0:7700 --db /srv/khala/khala.db
  NERVE_KHALA_POSTGRES=postgres://khala@db.internal/khala nerve khala serve --addr 0.0.0.0:7700 --pool-size 20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := resolveKhalaDB(f, cmd, &opts.DB, &opts.Postgres, dbCreate); err != nil {
				return err
			}
			if opts.MaxDepth < 1 {
				return usageErrorf("a top-level thread is at depth 0, its children at 1", "--max-spawn-depth %d: want 1 or more", opts.MaxDepth)
			}
			if runF != nil {
				return runF(opts)
			}
			return khalaServeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:7700", "address to listen on (host:port; port 0 picks one)")
	cmd.Flags().StringVar(&opts.DB, "db", "", "the bbolt database file (default $NERVE_HOME/khala.db)")
	cmd.Flags().StringVar(&opts.Postgres, "postgres", "", "serve from this PostgreSQL database (DSN), as one of several replicas (default $"+envKhalaPostgres+")")
	cmd.Flags().IntVar(&opts.PoolSize, "pool-size", 0, fmt.Sprintf("most PostgreSQL connections for requests (default %d)", khalapg.DefaultPoolSize))
	cmd.Flags().StringVar(&opts.LogLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().DurationVar(&opts.Grace, "grace", 30*time.Second, "how long shutdown waits for requests in flight")
	cmd.Flags().Int64Var(&opts.MaxBody, "max-body", 4<<20, "largest request body in bytes (larger: 413)")
	cmd.Flags().DurationVar(&opts.MaxWait, "max-wait", 60*time.Second, "longest claim long poll")
	cmd.Flags().StringArrayVar(&opts.WebhookAllow, "webhook-allow", nil, "also allow webhooks to this CIDR, IP or host name (repeatable; loopback, link-local and this machine are refused by default)")
	cmd.Flags().IntVar(&opts.MaxDepth, "max-spawn-depth", workflow.DefaultMaxSpawnDepth, "how deep child threads may nest (a child of a top-level thread is at depth 1)")
	return cmd
}

// How a command uses the bbolt file of --db.
type khalaDBUse int

const (
	dbCreate   khalaDBUse = iota // serve: creates the file when absent
	dbWrite                      // writes into it: only the default file may be created
	dbExisting                   // reads or removes: the file must exist
)

// resolveKhalaDB applies the defaults of --db and --postgres, which every
// khala command takes, and checks the bbolt file for use: a command that
// created a file no server uses would hand out a token, or report no
// people, of a database nobody serves (a typo in --db).
func resolveKhalaDB(f *Factory, cmd *cobra.Command, db, postgres *string, use khalaDBUse) error {
	named := cmd.Flags().Changed("db")
	if *postgres != "" && named {
		return usageErrorf("name one of them", "--db and --postgres exclude each other")
	}
	// Flags win over the environment: an explicit --db means bbolt.
	if *postgres == "" && !named {
		*postgres = f.Getenv(envKhalaPostgres)
	}
	if *postgres != "" {
		return nil
	}
	def := filepath.Join(config.Home(f.Getenv), "khala.db")
	if *db == "" {
		*db = def
	}
	what := *db
	if named {
		what = "--db " + *db
	}
	fi, err := os.Stat(*db)
	if err == nil && fi.IsDir() {
		return usageErrorf("e.g. --db "+filepath.Join(*db, "khala.db"), "%s is a directory; want a database file path", what)
	}
	if !errors.Is(err, fs.ErrNotExist) || use == dbCreate || (use == dbWrite && !named) {
		return nil // any other error is the opening's to report
	}
	if named {
		return usageErrorf("check --db: 'nerve khala serve' creates its database, by default "+def, "%s does not exist", what)
	}
	return usageErrorf("'nerve khala serve' creates it; name another server's file with --db", "no Khala database at %s", *db)
}

func khalaServeRun(ctx context.Context, opts *khalaServeOptions) error {
	lvl, err := log.ParseLevel(opts.LogLevel)
	if err != nil {
		return usageErrorf("use debug, info, warn or error", "--log-level %q: %v", opts.LogLevel, err)
	}
	_, port, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return usageErrorf("give host:port, e.g. 127.0.0.1:7700 or :7700", "--addr %q: %v", opts.Addr, err)
	}
	if err := checkPort(opts.Addr, port); err != nil {
		return err
	}
	if opts.MaxBody < 1024 {
		return usageErrorf("give at least 1024", "--max-body %d is too small", opts.MaxBody)
	}
	switch {
	case opts.PoolSize < 0 || opts.PoolSize > 1000:
		return usageErrorf("give 1 to 1000 connections (the database's max_connections bounds all replicas together)", "--pool-size %d", opts.PoolSize)
	case opts.PoolSize > 0 && opts.Postgres == "":
		return usageErrorf("add --postgres DSN, or drop --pool-size", "--pool-size applies to a PostgreSQL database only")
	}
	allow, err := khala.ParseWebhookAllow(opts.WebhookAllow)
	if err != nil {
		return usageErrorf("e.g. --webhook-allow 127.0.0.1 or --webhook-allow hooks.internal", "--webhook-allow %v", err)
	}
	where := "db " + opts.DB
	if opts.Postgres != "" {
		where = "postgres " + khalapg.DisplayDSN(opts.Postgres)
	}
	logger := log.NewWithOptions(opts.IO.ErrOut, log.Options{ReportTimestamp: true, TimeFormat: time.RFC3339, Prefix: "khala", Level: lvl})
	flush, err := startTelemetry(ctx, "nerve-khala", slog.New(logger))
	if err != nil {
		return err
	}
	defer flush()
	// A second signal, once shutdown has begun, exits at once.
	go func() {
		<-ctx.Done()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		fmt.Fprintln(opts.IO.ErrOut, "nerve: second signal: exiting without finishing requests")
		os.Exit(exitFailed)
	}()
	err = khala.Serve(ctx, khala.ServeOptions{
		Addr: opts.Addr, DB: opts.DB, Postgres: opts.Postgres, PoolSize: opts.PoolSize,
		Version: currentVersion().Version, Logger: slog.New(logger), ShutdownGrace: opts.Grace,
		Server: khala.Options{MaxBody: opts.MaxBody, MaxWait: opts.MaxWait, MaxSpawnDepth: opts.MaxDepth, WebhookAllow: allow},
		Ready: func(url string) {
			fmt.Fprintf(opts.IO.Out, "khala listening on %s (%s)\n", url, where)
			fmt.Fprintf(opts.IO.Out, "web console at %s/ (sign in with a token from 'nerve khala user add NAME')\n", url)
		},
	})
	return khalaServeError(err)
}

// khalaServeError adds what to do next to a failed start.
func khalaServeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, khaladb.ErrLocked):
		return &khalaHintError{err: err, hint: "stop the other server, or give this one its own file with --db"}
	case errors.Is(err, syscall.EADDRINUSE):
		return &khalaHintError{err: err, hint: "another process listens there; choose another --addr"}
	case errors.Is(err, khalapg.ErrBadDSN):
		return usageErrorf("give a URL such as postgres://USER@HOST:5432/DB?sslmode=require, or key=value pairs", "%s", err)
	case errors.Is(err, khalapg.ErrSchemaTooNew):
		return &khalaHintError{err: err, hint: "upgrade this nerve: every replica must run a version that knows the database's schema"}
	case errors.Is(err, khaladb.ErrUnavailable):
		return &khalaHintError{err: err, hint: "check that PostgreSQL runs and that the DSN's host, port, user, password and database are right"}
	}
	return err
}

// khalaHintError is a failure (exit 1) with a hint line.
type khalaHintError struct {
	err  error
	hint string
}

func (e *khalaHintError) Error() string { return e.err.Error() }
func (e *khalaHintError) Unwrap() error { return e.err }
func (e *khalaHintError) Hint() string  { return e.hint }
