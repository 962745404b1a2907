package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvRequire makes a missing PostgreSQL a test failure instead of a skip.
const EnvRequire = "NERVE_REQUIRE_POSTGRES"

// Bin returns the directory holding initdb and postgres: NERVE_PG_BIN, the
// one of initdb on PATH, or the newest /usr/lib/postgresql/*/bin.
func Bin() (string, error) {
	if d := os.Getenv("NERVE_PG_BIN"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[0]), nil
	}
	return "", errors.New("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin; apt-get install postgresql)")
}

func pgVersion(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Options tune a cluster.
type Options struct {
	// NoFsync turns fsync off: faster, and safe against a crash of the
	// server process (the page cache survives it), not of the machine.
	// Benchmarks leave it on, so figures include real commits.
	NoFsync bool
}

// Cluster is one throwaway PostgreSQL server.
type Cluster struct {
	opts Options
	bin  string
	root string // removed at the end; data/ and server.log inside
	port int
	cred *syscall.Credential // nil: run as ourselves

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	reaper *os.File // its stdin: closes when this process exits
	dbs    atomic.Int64
}

// Start creates and starts a cluster.
func Start(o Options) (*Cluster, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	base := "" // TMPDIR
	if c.cred != nil {
		base = "/tmp" // a TMPDIR of root's may be closed to the server's user
	}
	if c.root, err = os.MkdirTemp(base, "nerve-pg-"); err != nil {
		return nil, err
	}
	if err := c.startReaper(); err != nil {
		os.RemoveAll(c.root)
		return nil, err
	}
	if c.cred != nil {
		if err := os.Chown(c.root, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return nil, err
		}
	}
	if err := c.initdb(); err != nil {
		c.Remove()
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if c.port, err = freePort(); err == nil {
			if err = c.Run(); err == nil {
				return c, nil
			}
		}
		if attempt == 4 {
			c.Remove()
			return nil, err
		}
	}
}

// unprivileged is who runs the server when the tests run as root.
func unprivileged() (*syscall.Credential, error) {
	name := os.Getenv("NERVE_PG_USER")
	if name == "" {
		name = "nobody"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("postgres refuses to run as root and user %q is unknown (set NERVE_PG_USER): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// startReaper starts a detached shell that waits for this process to exit
// (its stdin, a pipe only we hold, closes), stops the server if it still
// runs, and removes the cluster's directory.
func (c *Cluster) startReaper() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	const script = `cat >/dev/null
pid=$(head -n1 "$1/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null
i=0; while [ -e "$1/data/postmaster.pid" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
rm -rf "$1"`
	cmd := exec.Command("/bin/sh", "-c", script, "reaper", c.root)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the cluster reaper: %w", err)
	}
	go cmd.Wait()
	c.reaper = w
	return nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.root, "data") }

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	// The parent-death signal stops the server if the test binary dies
	// without stopping it (SIGQUIT: immediate shutdown).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

func (c *Cluster) initdb() error {
	cmd := c.command("initdb", "-D", c.dataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// The superuser needs no password from loopback; any other role does,
	// so tests can check what a wrong password does.
	hba := "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	return os.WriteFile(filepath.Join(c.dataDir(), "pg_hba.conf"), []byte(hba), 0o600)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Run starts the server on the cluster's data and port (again, after
// Stop or Kill) and waits until it accepts connections.
func (c *Cluster) Run() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return errors.New("pgtest: the server is already running")
	}
	fsync := "on"
	if c.opts.NoFsync {
		fsync = "off"
	}
	logf, err := os.OpenFile(filepath.Join(c.root, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := c.command("postgres", "-D", c.dataDir(), "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync="+fsync, "-c", "max_connections=300", "-c", "shared_buffers=64MB",
		"-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			c.cmd, c.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited at start:\n%s", c.LogTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("postgres did not accept connections within 30s:\n%s", c.LogTail())
		}
	}
}

// Port is the server's loopback port.
func (c *Cluster) Port() int { return c.port }

// DSN is the superuser's URL for database db.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Stop shuts the server down gracefully (fast mode: sessions are ended,
// committed work is kept); Run starts it again.
func (c *Cluster) Stop() error { return c.halt(syscall.SIGINT) }

// Kill crashes the server (SIGKILL of the postmaster, as a crash or OOM
// kill would); Run starts it again, through crash recovery.
func (c *Cluster) Kill() error { return c.halt(syscall.SIGKILL) }

func (c *Cluster) halt(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
	if sig == syscall.SIGKILL {
		// Backends notice the postmaster's death on their own; a new
		// postmaster refuses to start while they hold shared memory.
		c.waitBackendsGone()
	}
	return nil
}

// waitBackendsGone waits until no process runs from this cluster's data
// directory any more.
func (c *Cluster) waitBackendsGone() {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !c.anyBackend() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// anyBackend reports whether a process still runs in the data directory
// (postgres processes keep it as their working directory).
func (c *Cluster) anyBackend() bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == c.dataDir() {
			return true
		}
	}
	return false
}

// Remove stops the server at once and deletes the cluster.
func (c *Cluster) Remove() {
	c.halt(syscall.SIGQUIT)
	os.RemoveAll(c.root)
	if c.reaper != nil {
		c.reaper.Close()
	}
}

// LogTail is the end of the server's log, for failure messages.
func (c *Cluster) LogTail() string {
	data, _ := os.ReadFile(filepath.Join(c.root, "server.log"))
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// CreateDatabase creates an empty database and returns its superuser DSN.
func (c *Cluster) CreateDatabase(ctx context.Context) (name, dsn string, err error) {
	name = fmt.Sprintf("test_%d_%d", os.Getpid(), c.dbs.Add(1))
	err = c.Exec(ctx, "CREATE DATABASE "+name)
	return name, c.DSN(name), err
}

// DropDatabase drops a database, ending its sessions.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	return c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// Exec runs one statement as the superuser in the postgres database.
func (c *Cluster) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}
