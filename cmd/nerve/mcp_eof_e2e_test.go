package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The lines a client writes to open a session, and two calls.
const (
	mcpInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	mcpInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	mcpListTools   = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	mcpReadThread  = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"thread_messages","arguments":{}}}`
)

// pipedMCP is `nerve mcp` run as a script runs it: its whole session
// written to stdin at once.
type pipedMCP struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr bytes.Buffer
	done           chan struct{} // closed when the process has exited
}

func startPipedMCP(t *testing.T, home string, vars map[string]string, lines ...string) *pipedMCP {
	t.Helper()
	p := &pipedMCP{cmd: exec.Command(nerveBin(t), "mcp"), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "NERVE_HOME="+home, "NERVE_NO_AUTOSTART=1")
	for k, v := range vars {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Dir = home
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	io.WriteString(p.stdin, strings.Join(lines, "\n")+"\n")
	return p
}

// exited waits for the process to exit 0 with nothing on stderr, within
// the time given, and returns its replies in the order written.
func (p *pipedMCP) exited(t *testing.T, within time.Duration) []map[string]any {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("nerve mcp has not exited within %s; stdout:\n%s\nstderr:\n%s", within, &p.stdout, &p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 || p.stderr.Len() > 0 {
		t.Fatalf("nerve mcp: exit %d, stderr:\n%s", code, &p.stderr)
	}
	var replies []map[string]any
	for line := range strings.Lines(p.stdout.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a line of stdout is not JSON: %q", line)
		}
		replies = append(replies, m)
	}
	return replies
}

// snapshotFIFO is a turn's environment whose snapshot is a named pipe:
// thread_messages blocks reading it, in flight, until the test writes.
func snapshotFIFO(t *testing.T, home string) (map[string]string, string) {
	path := filepath.Join(home, "snapshot.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"NERVE_THREAD": "w#thread-1", "NERVE_THREAD_SNAPSHOT": path, "NERVE_STEP": "2"}, path
}

// openedByReader waits for the call to open the FIFO and returns its
// writing end.
func openedByReader(t *testing.T, fifo string) *os.File {
	t.Helper()
	var f *os.File
	waitFor(t, "thread_messages to open the snapshot", func() bool {
		var err error
		f, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0) // fails until a reader has it open
		return err == nil
	})
	return f
}

// A client that writes its session and closes stdin (a script, a test)
// gets every reply, in order, and then the server exits 0. The SDK used
// to cancel what it had read and not answered at the end of stdin: the
// run printed nothing, or logged "initialized before initialize" (the
// initialize call cancelled, the notification after it handled).
func TestE2EMCPPipedSession(t *testing.T) {
	e := newEnv(t)

	t.Run("both replies, in order", func(t *testing.T) {
		for run := range 20 {
			p := startPipedMCP(t, e.home, nil, mcpInitialize, mcpInitialized, mcpListTools)
			p.stdin.Close()
			got := p.exited(t, 30*time.Second)
			if len(got) != 2 || got[0]["id"] != 1.0 || got[0]["result"] == nil || got[1]["id"] != 2.0 ||
				!strings.Contains(toJSON(got[1]["result"]), `"name":"thread_messages"`) {
				t.Fatalf("run %d: replies %v, want initialize's then tools/list's", run, got)
			}
		}
	})

	// The SDK drops a call whose id is in flight, without a reply; the
	// server waited for that reply for ever (in 9 runs of 10).
	t.Run("a call reusing the id of one in flight", func(t *testing.T) {
		for run := range 10 {
			p := startPipedMCP(t, e.home, nil, mcpInitialize, mcpInitialized, strings.Replace(mcpListTools, `"id":2`, `"id":1`, 1))
			p.stdin.Close()
			if got := p.exited(t, 5*time.Second); len(got) == 0 || got[0]["id"] != 1.0 || got[0]["result"] == nil {
				t.Fatalf("run %d: replies %v, want initialize's first", run, got)
			}
		}
	})

	t.Run("a call in flight at the end of stdin is answered", func(t *testing.T) {
		vars, fifo := snapshotFIFO(t, t.TempDir())
		p := startPipedMCP(t, e.home, vars, mcpInitialize, mcpInitialized, mcpReadThread)
		p.stdin.Close()
		f := openedByReader(t, fifo)
		io.WriteString(f, `{"step":1,"role":"author","content":"from the snapshot"}`+"\n")
		f.Close()
		got := p.exited(t, 30*time.Second)
		if len(got) != 2 || got[1]["id"] != 2.0 || !strings.Contains(toJSON(got[1]["result"]), "from the snapshot") {
			t.Fatalf("replies %v, want initialize's then thread_messages'", got)
		}
	})

	// The SDK waited for the calls in flight, which it does not cancel.
	for _, stdinClosed := range []bool{false, true} {
		t.Run(fmt.Sprintf("SIGTERM ends it at once with a call in flight, stdin closed %v", stdinClosed), func(t *testing.T) {
			vars, fifo := snapshotFIFO(t, t.TempDir())
			p := startPipedMCP(t, e.home, vars, mcpInitialize, mcpInitialized, mcpReadThread)
			defer p.stdin.Close()
			if stdinClosed {
				p.stdin.Close()
			}
			f := openedByReader(t, fifo) // open, never written: the call holds
			defer f.Close()
			p.cmd.Process.Signal(syscall.SIGTERM)
			if got := p.exited(t, 5*time.Second); len(got) != 1 || got[0]["id"] != 1.0 {
				t.Fatalf("replies %v, want initialize's alone", got)
			}
		})
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
