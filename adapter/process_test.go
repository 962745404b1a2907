package adapter

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

func TestMissingBinary(t *testing.T) {
	empty := t.TempDir()
	// The built-in name is looked up on the turn's PATH.
	_, err := runFake(t, "claude", Spec{}, Request{Env: []string{"PATH=" + empty}})
	e := asError(t, err, "claude")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false", err)
	}
	if want := `adapter claude: "claude" not found on PATH`; e.Error() != want {
		t.Errorf("message %q, want %q", e.Error(), want)
	}
	if !strings.Contains(e.Hint, "adapters.claude.binary") {
		t.Errorf("hint %q", e.Hint)
	}
	// A configured path that is not there.
	_, err = runFake(t, "codex", Spec{Binary: filepath.Join(empty, "codex")}, Request{})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("configured binary: %v", err)
	}
	// An exec command relative to the workdir.
	_, err = runFake(t, "bot", Spec{Type: "exec", Command: []string{"./bin/review"}}, Request{})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"./bin/review" not found`) {
		t.Errorf("exec command: %v", err)
	}
}

func TestWorkdirMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	_, err := runFake(t, "claude", fake(t, "claude", "replay", nil), Request{Workdir: dir})
	e := asError(t, err, "claude")
	if want := "adapter claude: workdir " + dir + " does not exist"; e.Error() != want {
		t.Errorf("message %q, want %q", e.Error(), want)
	}
	if !errors.Is(err, ErrWorkdir) {
		t.Error("not ErrWorkdir")
	}
}

// TestProcessSetup checks what the child gets: its own session (so no
// process it starts can join the daemon's group) and process group, the
// workdir, /dev/null on stdin, and the environment layered as documented.
func TestProcessSetup(t *testing.T) {
	dump := filepath.Join(t.TempDir(), "dump.json")
	c := fake(t, "claude", "replay", map[string]string{"FAKE_CLI_FILE": testdata("claude-success.jsonl"),
		"FAKE_CLI_DUMP": dump, "FROM_CONFIG": "yes", "OVERRIDDEN": "config"})
	work := t.TempDir()
	req := Request{Workdir: work, Prompt: "-starts like a flag", Env: []string{"NERVE_THREAD=code-review#thread-7", "OVERRIDDEN=request"}}
	if _, err := runFake(t, "claude", c, req); err != nil {
		t.Fatal(err)
	}
	d := readDump(t, dump)
	if d.StdinBytes != 0 {
		t.Errorf("stdin had %d bytes, want /dev/null", d.StdinBytes)
	}
	if d.Dir != work {
		t.Errorf("dir %q, want %q", d.Dir, work)
	}
	if d.Pgid != d.Pid || d.Pgid == syscall.Getpgrp() || d.Sid != d.Pid {
		t.Errorf("child pgid %d sid %d pid %d: not its own session and process group", d.Pgid, d.Sid, d.Pid)
	}
	if d.Args[len(d.Args)-2] != "--" || d.Args[len(d.Args)-1] != req.Prompt {
		t.Errorf("prompt not last after --: %q", d.Args)
	}
	for k, want := range map[string]string{
		"NERVE_THREAD": "code-review#thread-7", "FROM_CONFIG": "yes", "OVERRIDDEN": "request",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
		"PATH": os.Getenv("PATH"),
	} {
		if got := d.Env[k]; got != want {
			t.Errorf("env %s=%q, want %q", k, got, want)
		}
	}
}

func TestExecPrompt(t *testing.T) {
	t.Run("stdin", func(t *testing.T) {
		c := fake(t, "exec", "echo", nil)
		res, err := runFake(t, "bot", c, Request{Prompt: "review this\nplease"})
		if err != nil {
			t.Fatal(err)
		}
		if want := "stdin bytes: 18\nreview this\nplease"; res.Content != want {
			t.Errorf("content %q, want %q", res.Content, want)
		}
	})
	t.Run("placeholder", func(t *testing.T) {
		dump := filepath.Join(t.TempDir(), "dump.json")
		c := fake(t, "exec", "echo", map[string]string{"FAKE_CLI_DUMP": dump})
		c.Command = append(c.Command, "--task={{prompt}}", "{{prompt}}")
		res, err := runFake(t, "bot", c, Request{Prompt: "fix it"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Content != "stdin bytes: 0" {
			t.Errorf("content %q: stdin should be /dev/null", res.Content)
		}
		if d := readDump(t, dump); strings.Join(d.Args, " ") != "--task=fix it fix it" {
			t.Errorf("args %q", d.Args)
		}
	})
}

// TestTimeoutKillsGroup: a CLI that hangs (with a grandchild holding its
// stdout) is killed with its whole group when the timeout passes, also
// when it ignores SIGTERM.
func TestTimeoutKillsGroup(t *testing.T) {
	for _, ignoreTerm := range []string{"0", "1"} {
		t.Run("ignore_term="+ignoreTerm, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pids")
			c := fake(t, "codex", "hang", map[string]string{"FAKE_CLI_PIDFILE": pidfile, "FAKE_CLI_IGNORE_TERM": ignoreTerm})
			c.Timeout = yamlfile.Duration(time.Second)
			_, err := runFake(t, "codex", c, Request{})
			leader, grandchild := readPids(t, pidfile)
			e := asError(t, err, "codex")
			if !errors.Is(err, ErrTimeout) || e.Reason != "timed out after 1s" {
				t.Fatalf("err %v, want a timeout", err)
			}
			if !strings.Contains(e.Error(), "killed by signal") {
				t.Errorf("message %q does not say the CLI was killed", e.Error())
			}
			waitGone(t, leader, "cli")
			waitGone(t, grandchild, "grandchild")
		})
	}
}

func TestCancelKillsGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	c := fake(t, "gemini", "hang", map[string]string{"FAKE_CLI_PIDFILE": pidfile, "FAKE_CLI_FILE": testdata("gemini-sigterm.jsonl")})
	a, err := New("gemini", c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel once the CLI is demonstrably running and talking.
	_, err = a.Run(ctx, Request{Workdir: t.TempDir(), Prompt: "p", OnOutput: func([]byte) { cancel() }})
	leader, grandchild := readPids(t, pidfile)
	e := asError(t, err, "gemini")
	if !errors.Is(err, context.Canceled) || e.Reason != "cancelled" {
		t.Fatalf("err %v, want cancelled", err)
	}
	waitGone(t, leader, "cli")
	waitGone(t, grandchild, "grandchild")

	// A context that is already done starts nothing.
	_, err = a.Run(ctx, Request{Workdir: t.TempDir(), Prompt: "p"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("run on a cancelled context: %v", err)
	}
}

// TestEscapedGrandchild: a grandchild that left the process group and
// keeps stdout open cannot hold the turn: Run returns once the CLI has
// exited and the pipes' drain time is up.
func TestEscapedGrandchild(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	c := fake(t, "claude", "escape", map[string]string{"FAKE_CLI_PIDFILE": pidfile, "FAKE_CLI_FILE": testdata("claude-success.jsonl")})
	res, err := runFake(t, "claude", c, Request{})
	_, grandchild := readPids(t, pidfile)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "Hello from the stub model." {
		t.Errorf("content %q", res.Content)
	}
	if !alive(grandchild) {
		t.Log("escaped grandchild already gone") // not nerve's doing; cleanup kills it otherwise
	}
}

// TestFloodBounded: a CLI printing hundreds of megabytes costs bounded
// memory and yields truncated content.
func TestFloodBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("floods 300 MB through a pipe")
	}
	measure := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	t.Run("many lines", func(t *testing.T) {
		c := fake(t, "exec", "flood", map[string]string{"FAKE_CLI_FLOOD_BYTES": strconv.Itoa(200 << 20)})
		var res *Result
		var err error
		alloc := measure(func() { res, err = runFake(t, "bot", c, Request{}) })
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || !strings.HasSuffix(res.Content, truncationNote) || len(res.Content) > MaxContentBytes+len(truncationNote) {
			t.Errorf("content of %d bytes, truncated %v", len(res.Content), res.Truncated)
		}
		if alloc > 64<<20 {
			t.Errorf("allocated %d MiB for a 200 MiB flood", alloc>>20)
		}
	})
	t.Run("one line then result", func(t *testing.T) {
		c := fake(t, "claude", "flood", map[string]string{"FAKE_CLI_FLOOD_BYTES": strconv.Itoa(100 << 20),
			"FAKE_CLI_FLOOD_ONE_LINE": "1", "FAKE_CLI_FILE": testdata("claude-success.jsonl")})
		var longest int
		var res *Result
		var err error
		alloc := measure(func() {
			res, err = runFake(t, "claude", c, Request{OnOutput: func(l []byte) { longest = max(longest, len(l)) }})
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Content != "Hello from the stub model." {
			t.Errorf("content %q", res.Content)
		}
		if longest != maxLineBytes {
			t.Errorf("longest line seen %d, want it cut at %d", longest, maxLineBytes)
		}
		if alloc > 64<<20 {
			t.Errorf("allocated %d MiB for a 100 MiB line", alloc>>20)
		}
	})
}

// TestLineSplitter feeds the same stream whole, byte by byte and in
// uneven pieces: the lines must not depend on how reads cut it.
func TestLineSplitter(t *testing.T) {
	in := "one\r\ntwo\n\n" + strings.Repeat("x", 100) + "\nlast"
	want := []string{"one", "two", "", "xxxxxxxxxx", "last"}
	for _, size := range []int{len(in), 1, 7, 64} {
		var got []string
		var cuts []bool
		l := newLineSplitter(10, func(line []byte, cut bool) {
			got = append(got, string(line))
			cuts = append(cuts, cut)
		})
		for rest := in; rest != ""; {
			n := min(size, len(rest))
			l.write([]byte(rest[:n]))
			rest = rest[n:]
		}
		l.close()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("pieces of %d: lines %q, want %q", size, got, want)
			continue
		}
		if !cuts[3] || cuts[0] || cuts[4] {
			t.Errorf("pieces of %d: cut flags %v", size, cuts)
		}
	}
}

func TestTailAndTextBuf(t *testing.T) {
	tl := newTail(3, 5)
	for _, l := range []string{"a", "", "  ", "bbbbbbbbbb", "c", "d"} {
		tl.add([]byte(l))
	}
	if got := strings.Join(tl.get(), "|"); got != "bbbbb|c|d" {
		t.Errorf("tail %q", got)
	}
	var tb textBuf
	tb.WriteString(strings.Repeat("é", MaxContentBytes)) // 2 bytes each: cut mid-rune
	if !tb.truncated || tb.Len() > MaxContentBytes || !bytes.Equal([]byte(tb.String()[tb.Len():]), []byte(truncationNote)) {
		t.Errorf("textBuf len %d truncated %v", tb.Len(), tb.truncated)
	}
	if s := tb.String(); !strings.HasPrefix(s[tb.Len()-2:], "é") {
		t.Errorf("cut inside a rune: %q", s[tb.Len()-4:tb.Len()])
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Adapter: "claude", ExitStatus: 1, Reason: "API Error: 500",
		StderrTail: []string{"first", "", "second", "third", "fourth"}}
	if want := "adapter claude: API Error: 500 (exit status 1); stderr: second | third | fourth"; e.Error() != want {
		t.Errorf("got %q\nwant %q", e.Error(), want)
	}
	e = &Error{Adapter: "codex", ExitStatus: -1, Signal: "signal killed", Reason: "timed out after 1s", Err: ErrTimeout}
	if want := "adapter codex: timed out after 1s (killed by signal killed)"; e.Error() != want {
		t.Errorf("got %q", e.Error())
	}
	if !errors.Is(e, ErrTimeout) {
		t.Error("Unwrap")
	}
}

// TestPostureFiles: the gemini policy file exists while the CLI runs and
// is gone after; claude's full posture tells a root-run CLI it is in a
// sandbox.
func TestPostureFiles(t *testing.T) {
	dump := filepath.Join(t.TempDir(), "dump.json")
	c := fake(t, "gemini", "replay", map[string]string{"FAKE_CLI_FILE": testdata("gemini-success.jsonl"), "FAKE_CLI_DUMP": dump})
	if _, err := runFake(t, "gemini", c, Request{}); err != nil {
		t.Fatal(err)
	}
	d := readDump(t, dump)
	policy := d.Args[len(d.Args)-1]
	if d.Args[len(d.Args)-2] != "--policy" {
		t.Fatalf("args %q", d.Args)
	}
	if _, err := os.Stat(policy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("policy file %s left behind (%v)", policy, err)
	}
	if d.Env["GEMINI_TELEMETRY_ENABLED"] != "false" {
		t.Errorf("telemetry env %q", d.Env["GEMINI_TELEMETRY_ENABLED"])
	}

	c = fake(t, "claude", "replay", map[string]string{"FAKE_CLI_FILE": testdata("claude-success.jsonl"), "FAKE_CLI_DUMP": dump})
	c.Permissions = PermFull
	if _, err := runFake(t, "claude", c, Request{}); err != nil {
		t.Fatal(err)
	}
	want := ""
	if os.Geteuid() == 0 {
		want = "1"
	}
	if got := readDump(t, dump).Env["IS_SANDBOX"]; got != want && os.Getenv("IS_SANDBOX") == "" {
		t.Errorf("IS_SANDBOX=%q, want %q", got, want)
	}
}

// TestLongPrompt: a prompt longer than one execve argument may be goes on
// stdin for the CLIs that read it there, and fails clearly for the others.
func TestLongPrompt(t *testing.T) {
	long := strings.Repeat("p", maxArgBytes+1)
	for _, typ := range []string{"claude", "codex", "gemini"} {
		t.Run(typ, func(t *testing.T) {
			dump := filepath.Join(t.TempDir(), "dump.json")
			file := map[string]string{"claude": "claude-success.jsonl", "codex": "codex-success.jsonl", "gemini": "gemini-success.jsonl"}[typ]
			c := fake(t, typ, "replay", map[string]string{"FAKE_CLI_FILE": testdata(file), "FAKE_CLI_DUMP": dump})
			if _, err := runFake(t, typ, c, Request{Prompt: long}); err != nil {
				t.Fatal(err)
			}
			d := readDump(t, dump)
			if d.Stdin != long {
				t.Errorf("stdin had %d bytes, want the %d-byte prompt", d.StdinBytes, len(long))
			}
			for _, a := range d.Args {
				if len(a) > 100 {
					t.Errorf("prompt still passed as an argument")
				}
			}
		})
	}
	_, err := runFake(t, "cursor", fake(t, "cursor", "replay", nil), Request{Prompt: long})
	if e := asError(t, err, "cursor"); !strings.Contains(e.Reason, "longer than Linux allows on a command line") {
		t.Errorf("cursor: %v", err)
	}
}
