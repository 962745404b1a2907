package sandbox

import (
	"slices"
	"strings"
	"testing"
)

// mounts returns Command's mount steps after the system's trees, /proc
// and /dev, as "op [src] dst" strings, in order.
func mounts(argv []string) []string {
	var out []string
	for i := slices.Index(argv, "--dev") + 2; i < len(argv); i++ {
		switch argv[i] {
		case "--tmpfs", "--remount-ro":
			out = append(out, argv[i]+" "+argv[i+1])
			i++
		case "--bind", "--ro-bind", "--ro-bind-try":
			out = append(out, argv[i]+" "+argv[i+1]+" "+argv[i+2])
			i += 2
		case "--":
			return out
		}
	}
	return out
}

// The file system is built parents first, NERVE_HOME hidden even where
// a bound tree holds it, and only the snapshot of it shown again.
func TestCommandOrder(t *testing.T) {
	s := &Spec{
		Workdir: "/home/o/.nerve/worktrees/w-1",
		Home:    "/home/o",
		Hide:    []string{"/home/o/.nerve"},
		Read:    []string{"/home/o/.gitconfig", "/home/o/.nerve/snapshots/t.jsonl"},
		State:   []Bind{{Src: "/home/o/.nerve/sandbox/claude/.claude", Dst: "/home/o/.claude", Write: true}},
		Env:     []string{"PATH=/usr/bin", "HOME=/home/o"},
		Network: NetAllowList,
		Extra:   Extra{Binds: []Bind{{Src: "/home/o/.nerve/turns/1.sock", Dst: "/run/nerve/turn.sock"}}, Env: []string{"NERVE_TURN_SOCKET=/run/nerve/turn.sock"}, Prefix: []string{"/usr/bin/env"}},
		Bwrap:   "/usr/bin/bwrap",
	}
	path, argv, env := s.Command("/usr/bin/claude", []string{"-p", "hi"})
	if path != "/usr/bin/bwrap" || argv[0] != "bwrap" {
		t.Fatalf("path %q argv0 %q", path, argv[0])
	}
	want := []string{
		"--tmpfs /tmp",
		"--tmpfs /home/o",
		"--ro-bind-try /home/o/.gitconfig /home/o/.gitconfig",
		"--bind /home/o/.nerve/sandbox/claude/.claude /home/o/.claude",
		"--tmpfs /home/o/.nerve",
		"--ro-bind-try /home/o/.nerve/snapshots/t.jsonl /home/o/.nerve/snapshots/t.jsonl",
		"--bind /home/o/.nerve/worktrees/w-1 /home/o/.nerve/worktrees/w-1",
		"--ro-bind /home/o/.nerve/turns/1.sock /run/nerve/turn.sock",
		"--remount-ro /home/o/.nerve",
		"--remount-ro /",
	}
	if got := mounts(argv); !slices.Equal(got, want) {
		t.Fatalf("mounts\n got %q\nwant %q", got, want)
	}
	if !slices.Contains(argv, "--unshare-all") || slices.Contains(argv, "--share-net") || !slices.Contains(argv, "--die-with-parent") {
		t.Errorf("namespaces: %q", argv)
	}
	if tail := strings.Join(argv[slices.Index(argv, "--"):], " "); tail != "-- /usr/bin/env /usr/bin/claude -p hi" {
		t.Errorf("command %q", tail)
	}
	if !slices.Equal(env, []string{"PATH=/usr/bin", "HOME=/home/o", "NERVE_TURN_SOCKET=/run/nerve/turn.sock"}) {
		t.Errorf("env %q", env)
	}
	s.Network = NetOpen
	if _, argv, _ := s.Command("/usr/bin/claude", nil); !slices.Contains(argv, "--share-net") {
		t.Errorf("network open keeps the host's network: %q", argv)
	}
}

// A binary outside the system's trees is reachable through its
// directory, or alone when that directory would show HOME or NERVE_HOME.
func TestCommandBinaries(t *testing.T) {
	s := &Spec{Home: "/home/o", Hide: []string{"/srv/nerve"}, Executables: []string{"/srv/nerve/nerve", "/opt/x/y"}}
	_, argv, _ := s.Command("/home/o/bin/agent.sh", nil)
	got := mounts(argv)
	for _, w := range []string{"--ro-bind /home/o/bin /home/o/bin", "--ro-bind /srv/nerve/nerve /srv/nerve/nerve"} {
		if !slices.Contains(got, w) {
			t.Errorf("missing %q in %q", w, got)
		}
	}
	for _, m := range got {
		if strings.Contains(m, "/opt/x") || strings.HasSuffix(m, " /srv/nerve") && strings.HasPrefix(m, "--ro-bind") {
			t.Errorf("bound %q", m)
		}
	}
	_, argv, _ = s.Command("/home/o/agent.sh", nil)
	if got := mounts(argv); !slices.Contains(got, "--ro-bind /home/o/agent.sh /home/o/agent.sh") || slices.Contains(got, "--ro-bind /home/o /home/o") {
		t.Errorf("a binary directly in HOME: %q", got)
	}
}
