package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/internal/envlist"
)

// Modes, as daemon.sandbox and an adapter's sandbox: write them.
const (
	ModeAuto  = "auto"  // bwrap where it works, else none (with a warning)
	ModeBwrap = "bwrap" // always bwrap: a turn fails where it does not work
	ModeNone  = "none"  // no sandbox: the CLI runs as the owner
)

// Modes lists the modes in the order they are offered.
var Modes = []string{ModeAuto, ModeBwrap, ModeNone}

// Network postures, as sandbox.network: writes them.
const (
	NetOpen      = "open"       // the host's network
	NetAllowList = "allow-list" // none of its own; the daemon's proxy admits listed hosts
	NetNone      = "none"       // no network at all
)

// Networks lists the network postures in the order they are offered.
var Networks = []string{NetOpen, NetAllowList, NetNone}

// Bind is a host path made visible inside the sandbox.
type Bind struct {
	Src, Dst string
	Write    bool
}

// Extra is what a per-turn service (the network proxy, the per-turn
// socket) adds to one turn's sandbox.
type Extra struct {
	// Binds are made after everything else (e.g. the per-turn socket at
	// /run/nerve/turn.sock).
	Binds []Bind
	// Env is added inside (NERVE_TURN_SOCKET=..., HTTPS_PROXY=...).
	Env []string
	// Prefix is a command run inside the sandbox that runs the CLI as its
	// child (the network bridge), or nil.
	Prefix []string
}

// Merge adds o to e.
func (e *Extra) Merge(o Extra) {
	e.Binds = append(e.Binds, o.Binds...)
	e.Env = append(e.Env, o.Env...)
	e.Prefix = append(e.Prefix, o.Prefix...)
}

// Spec is one turn's sandbox.
type Spec struct {
	// Workdir is read-write, at its own path.
	Workdir string
	// Home is the owner's HOME path: an empty tmpfs inside.
	Home string
	// State are the CLI's state directories and files, read-write (per
	// adapter, or the real ones with share_state).
	State []Bind
	// Read are host paths bound read-only at the same path (sandbox.read,
	// expanded; the nerve binary's directory; the thread snapshot). A
	// path that does not exist is skipped.
	Read []string
	// Executables are programs besides the CLI the turn must be able to
	// run (the nerve binary): bound like the CLI's own (see Command).
	Executables []string
	// Hide are host paths that must not be seen even where a bound tree
	// holds them (NERVE_HOME): each becomes an empty tmpfs. A Read path
	// beneath one is still bound.
	Hide []string
	// Env is the whole environment inside (allow-list, nerve's variables,
	// the adapter's, Extra.Env).
	Env []string
	// Network is NetOpen, NetAllowList or NetNone: anything but open
	// unshares the network namespace.
	Network string
	// Extra is merged from every per-turn service.
	Extra Extra
	// Bwrap is the bwrap binary; empty means "bwrap" on the daemon's PATH
	// (found by Available).
	Bwrap string
}

// systemDirs are bound read-only when they exist: what a CLI needs to
// run (binaries, libraries, certificates, resolv.conf, timezone data).
// Not /var, /srv, /home, /root, /mnt or /run: the owner's data and
// services live there.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix"}

// systemPath reports whether p lies in a tree bound read-only anyway.
func systemPath(p string) bool {
	for _, d := range systemDirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// mount is one step of the sandbox's file system, in the order bwrap
// makes them: a parent before what is mounted beneath it.
type mount struct {
	rank     int
	op       string // --ro-bind-try, --ro-bind, --bind, --tmpfs
	src, dst string
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

// Command returns the bwrap command line that runs binary with args in
// the sandbox: the path to execute, its argv (argv[0] "bwrap") and the
// environment to start it with. binary is an absolute path; its install
// directory is bound read-only when it lies outside the system's trees.
func (s *Spec) Command(binary string, args []string) (path string, argv []string, env []string) {
	path = s.Bwrap
	if path == "" {
		if path = bwrapPath(); path == "" {
			path = "bwrap"
		}
	}
	// All namespaces (user, pid, net, ipc, uts, cgroup): the pid one
	// makes bwrap its init, so whatever the CLI leaves (a nohup, a double
	// fork, a setsid) dies when the CLI does; --die-with-parent kills the
	// sandbox with the daemon (the signal follows the OS thread that
	// started bwrap, which the Go runtime does not end unless a goroutine
	// locked to it exits: nerve locks none). No --new-session: the
	// adapter already starts bwrap in a session of its own without a
	// terminal, and staying in its process group lets SIGTERM reach the
	// CLI for a graceful end.
	argv = []string{"bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"}
	if s.Network == NetOpen {
		argv = append(argv, "--share-net")
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				argv = append(argv, "--symlink", t, d)
			}
		case fi.IsDir():
			argv = append(argv, "--ro-bind", d, d)
		}
	}
	argv = append(argv, "--proc", "/proc", "--dev", "/dev")

	var ms []mount
	add := func(rank int, op, src, dst string) {
		if dst != "" && dst != "/" {
			ms = append(ms, mount{rank: rank, op: op, src: src, dst: filepath.Clean(dst)})
		}
	}
	// Ranks order mounts at the same depth: the empty trees first, then
	// what is bound into them, then NERVE_HOME hidden over whatever
	// bound tree holds it.
	add(0, "--tmpfs", "", "/tmp")
	add(0, "--tmpfs", "", s.Home)
	for _, p := range s.Read {
		add(1, "--ro-bind-try", p, p)
	}
	for _, b := range append([]string{binary}, s.Executables...) {
		for _, p := range binaryPaths(b, s.Covers) {
			add(1, "--ro-bind", p, p)
		}
	}
	for _, b := range s.State {
		add(1, bindOp(b), b.Src, b.Dst)
	}
	add(1, "--bind", s.Workdir, s.Workdir)
	for _, h := range s.Hide {
		add(2, "--tmpfs", "", h)
	}
	// Parents before what is mounted beneath them.
	slices.SortStableFunc(ms, func(a, b mount) int {
		if d := depth(a.dst) - depth(b.dst); d != 0 {
			return d
		}
		return a.rank - b.rank
	})
	for _, b := range s.Extra.Binds {
		ms = append(ms, mount{op: bindOp(b), src: b.Src, dst: b.Dst})
	}
	for _, m := range ms {
		if m.op == "--tmpfs" {
			argv = append(argv, m.op, m.dst)
		} else {
			argv = append(argv, m.op, m.src, m.dst)
		}
	}
	// Nothing outside the binds is writable: not the root (bwrap's
	// tmpfs), nor what hides NERVE_HOME (a nerve inside could start a
	// daemon of its own there).
	for _, h := range s.Hide {
		argv = append(argv, "--remount-ro", filepath.Clean(h))
	}
	argv = append(argv, "--remount-ro", "/")
	if s.Workdir != "" {
		argv = append(argv, "--chdir", s.Workdir)
	}
	// The environment is bwrap's own, passed through: nothing of the
	// daemon's reaches the CLI but what Env holds.
	env = envlist.Merge(s.Env, s.Extra.Env)
	argv = append(argv, "--")
	argv = append(argv, s.Extra.Prefix...)
	argv = append(argv, binary)
	argv = append(argv, args...)
	return path, argv, env
}

func bindOp(b Bind) string {
	if b.Write {
		return "--bind"
	}
	return "--ro-bind"
}

// Covers reports whether binding dir would show more than it should:
// it is HOME, or holds HOME or a hidden path.
func (s *Spec) Covers(dir string) bool {
	if s.Home != "" && under(s.Home, dir) {
		return true
	}
	for _, h := range s.Hide {
		if under(h, dir) {
			return true
		}
	}
	return false
}

// binaryPaths make binary runnable inside when it lives outside the
// system's trees: its own directory (PATH finds it there) and, when it is
// a link (npm's node_modules/.bin/claude), the package tree it points into
// (the node_modules holding it, for its dependencies). A directory that
// would show HOME or NERVE_HOME (Covers) is replaced by the file alone.
func binaryPaths(binary string, covered func(string) bool) []string {
	if binary == "" || !filepath.IsAbs(binary) {
		return nil
	}
	var out []string
	keep := func(dir, file string) {
		switch {
		case systemPath(dir):
		case covered(dir):
			out = append(out, file)
		default:
			out = append(out, dir)
		}
	}
	keep(filepath.Dir(binary), binary)
	real, err := filepath.EvalSymlinks(binary)
	if err != nil || real == binary {
		return out
	}
	d := filepath.Dir(real)
	if i := strings.LastIndex(d, "/node_modules/"); i >= 0 {
		d = d[:i+len("/node_modules")]
	}
	keep(d, real)
	return out
}
