package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/atomicfile"
	"github.com/nerve-agents/nerve/knowledge"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/sense"
	"github.com/nerve-agents/nerve/store"
)

// Options configure a daemon run.
type Options struct {
	Config *config.Config
	// Load re-reads nerve.yaml for hot reload; nil disables reloading.
	Load func() (*config.Config, error)
	// Executable is the nerve binary adapters find on PATH.
	Executable string
	Version    string
	Logger     *slog.Logger
	// Hurry, when it closes during shutdown (a second SIGTERM or Ctrl-C),
	// cuts the grace period short: running turns are killed at once.
	Hurry <-chan struct{}
}

// Daemon is one running nerve daemon.
type Daemon struct {
	opts   Options
	paths  config.Paths
	log    *slog.Logger
	store  *store.Store
	start  time.Time
	runner *runner

	outbox   *outbox
	capacity *sense.Capacity
	gate     *reflex.Gate // daily caps and rate-limit back-off, per adapter
	rdefs    remoteDefs
	// knowledge keeps the indexes `nerve knowledge query` asked about
	// open; knowledgeQueries counts the queries it answered.
	knowledge        knowledge.Readers
	knowledgeQueries atomic.Int64

	mu       sync.RWMutex
	cfg      *config.Config
	cfgState ConfigState
	cfgWatch *config.Watcher // nil: no hot reload
	senses   *senseSet
}

// Run starts the daemon and blocks until ctx is cancelled (SIGTERM), then
// shuts down in two phases: stop starting work, let running turns finish
// within the grace period, then kill what is left. It returns nil after a
// clean shutdown.
func Run(ctx context.Context, opts Options) error {
	cfg := opts.Config
	paths := config.Paths{Home: cfg.Home}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(paths.Home, 0o700); err != nil {
		return fmt.Errorf("create NERVE_HOME %s: %w", paths.Home, err)
	}
	// Single instance first: the lock is dropped by the OS if we crash.
	lock, err := lockFile(paths.Lock())
	if errors.Is(err, errLocked) {
		return &ErrRunning{Home: paths.Home}
	}
	if err != nil {
		return err
	}
	defer lock.Close()

	// Listen before building the backend, so clients see us early and a
	// bad socket fails before any state is touched.
	ln, err := listen(paths.Socket())
	if err != nil {
		return err
	}
	defer os.Remove(paths.Socket())

	st, err := store.Open(paths.DB(), 5*time.Second)
	if err != nil {
		ln.Close()
		return err
	}
	defer st.Close()

	if err := writePID(paths.PID()); err != nil {
		logger.Warn("write pid file", "err", err)
	}
	defer os.Remove(paths.PID())

	d := &Daemon{opts: opts, paths: paths, log: logger, store: st, start: time.Now().UTC(), cfg: cfg,
		cfgState: ConfigState{File: cfg.File, LoadedAt: time.Now().UTC()}}
	workCtx, killWork := context.WithCancel(context.Background())
	defer killWork()
	d.gate = reflex.NewGate(d.config, st, logger)
	d.runner = newRunner(d, workCtx)
	d.outbox = newOutbox(d)
	d.capacity = sense.NewCapacity(cfg.Agent.MaxConcurrentTurns)

	if addr := cfg.Daemon.MetricsAddr; addr != "" {
		_, stopMetrics, err := d.serveMetrics(addr)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopMetrics()
	}

	var watch func(context.Context)
	if opts.Load != nil {
		watch = d.watchConfig()
	}
	srv := &http.Server{Handler: d.routes(), ReadHeaderTimeout: 10 * time.Second, ConnContext: withConn}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("daemon started", "pid", os.Getpid(), "home", paths.Home, "version", opts.Version)
	if sb := SandboxStatusOf(cfg); sb.Warning != nil {
		logger.Warn("sandbox: "+*sb.Warning, "daemon.sandbox", sb.Mode)
	}

	if err := becomeSubreaper(); err != nil {
		logger.Warn("cannot become the subreaper of the turns' processes; one that leaves its turn's group may outlive it", "err", err)
	}
	stopSweeps := d.runner.startSweeps()
	d.runner.killStaleProcs()
	d.runner.reconcile()
	stopTreeChecks := d.runner.startTreeChecks()
	outboxCtx, stopOutbox := context.WithCancel(context.Background())
	outboxDone := make(chan struct{})
	go func() { defer close(outboxDone); d.outbox.run(outboxCtx) }()
	d.runner.resumeAll()
	d.mu.Lock()
	d.senses = d.startSenses(cfg)
	d.mu.Unlock()
	if watch != nil {
		go watch(ctx)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Error("control socket failed", "err", err)
		}
	}
	err = d.shutdown(srv, killWork)
	stopTreeChecks()
	stopSweeps()
	d.knowledge.Close()
	d.runner.procs.close()
	stopOutbox()
	<-outboxDone
	d.outbox.drain(5 * time.Second)
	return err
}

// shutdown stops new work, drains running turns for the grace period, then
// kills the rest. Threads whose turns were killed stay running on disk and
// resume at those turns on the next start.
func (d *Daemon) shutdown(srv *http.Server, killWork context.CancelFunc) error {
	grace := d.config().Daemon.ShutdownGrace.D()
	d.log.Info("shutting down", "grace", grace, "active_turns", d.runner.activeCount())
	d.mu.Lock()
	senses := d.senses
	d.mu.Unlock()
	if senses != nil {
		senses.stop() // claim nothing more
	}
	d.runner.drain()
	drained := d.runner.waitIdle(grace, d.opts.Hurry)
	if !drained {
		d.log.Warn("grace period over; killing running turns", "active_turns", d.runner.activeCount())
	}
	killWork()
	d.runner.wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx) // followers of a log stream are cut off here
	d.log.Info("daemon stopped")
	return nil
}

func (d *Daemon) config() *config.Config {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.cfg
}

func writePID(path string) error {
	return atomicfile.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}
