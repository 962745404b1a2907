package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/sandbox"
)

// guardedWorkflow has an agent prepare (step 1), then a person approve
// (step 2) while the agent under test works (step 3).
const guardedWorkflow = `workflow: guarded
moderator: |
  $count(messages) = 0 ? {"role": "prep", "instruction": "prepare"}
  : $count(messages) = 1 ? [{"role": "approver", "instruction": "approve"}, {"role": "worker", "instruction": "work"}]
  : {"done": true, "result": messages[role = "approver"].agent}
roles:
  prep: {adapter: prep, prompt: Prepare.}
  approver:
    human: true
    prompt: Approve.
    meta: {type: object, required: [approved], properties: {approved: {type: boolean}}}
  worker: {adapter: sneaky, prompt: Work.}
`

// tsockAgent tries, from inside its turn, what the turn's socket must
// refuse and what it must serve, each command's output and exit status in
// a file of its workdir; a process it leaves behind (setsid, a double
// fork) tries again once the test says the turn is over.
const tsockAgent = `#!/bin/sh
cat >/dev/null
o="$NERVE_WORKDIR"
t() { n=$1; shift; "$@" >"$o/$n.out" 2>&1; echo "exit $?" >>"$o/$n.out"; }
echo "$NERVE_TURN_SOCKET" >"$o/socket.path"
t answer nerve thread answer "$NERVE_THREAD" "approved by me" --step 2 --meta '{"approved": true}'
t answerother nerve thread answer waiting#thread-1 "decided by me"
t other nerve thread messages waiting#thread-1
t list nerve workflow logs waiting
t stop nerve daemon stop
t status nerve daemon status
t own nerve thread messages --json
t ownsock env NERVE_THREAD_SNAPSHOT= nerve thread messages --json
t run nerve workflow run kid --json
# nerve mcp as a client drives it: each call answered before the next.
mkfifo "$o/mcp.in"
nerve mcp <"$o/mcp.in" >"$o/mcp.json" 2>"$o/mcp.err" &
mp=$!
exec 3>"$o/mcp.in"
ask() {
  echo "$2" >&3
  i=0
  while ! grep -q "\"id\":$1," "$o/mcp.json" && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
}
ask 1 '` + mcpInitialize + `'
echo '` + mcpInitialized + `' >&3
ask 2 '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notify","arguments":{"level":"info","message":"from inside the turn"}}}'
ask 3 '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"thread_status","arguments":{"thread":"waiting#thread-1"}}}'
ask 4 '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"workflow_run","arguments":{"workflow":"kid","wait":true}}}'
exec 3>&-
wait $mp
echo "exit $?" >>"$o/mcp.json"
cat "$o/mcp.json" "$o/mcp.err" >"$o/mcp.out"
sh -c 'setsid sh "$0" </dev/null >/dev/null 2>&1 & echo $! >"$1"' "$o/late.sh" "$o/late.pid"
i=0
while [ ! -f "$o/late.started" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
echo worked
`

// tsockLate is the process the agent leaves behind (setsid, its parent
// gone): it answers the thread's human turn through the turn's socket
// while the turn runs, then again once the test says the turn ended.
const tsockLate = `o=$(dirname "$0")
nerve thread answer "$NERVE_THREAD" "escaped" --step 2 --meta '{"approved": true}' >"$o/escaped.out" 2>&1
echo "exit $?" >>"$o/escaped.out"
touch "$o/late.started"
i=0
while [ ! -f "$o/ended" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
nerve thread answer "$NERVE_THREAD" "escaped, later" --step 2 --meta '{"approved": true}' >"$o/late.out" 2>&1
echo "exit $?" >>"$o/late.out"
`

// From inside a turn, through its socket, in both postures (no sandbox;
// bwrap where it works): the turn answers no human turn (its own
// thread's or another's), reads no other thread, lists none, neither
// stops the daemon nor reads its status; it reads its own thread (from
// the snapshot or the socket), starts a child and follows it, and
// through 'nerve mcp' notifies and starts a child, while another
// thread stays out of reach. The turn completes; after it, its socket is
// gone, and what the turn left behind reaches nothing.
func TestE2ETurnSocket(t *testing.T) {
	for _, posture := range []string{"none", "bwrap"} {
		t.Run(posture, func(t *testing.T) {
			if posture == "bwrap" {
				if err := sandbox.Available(); err != nil {
					t.Skip(err)
				}
			}
			testTurnSocket(t, posture)
		})
	}
}

func testTurnSocket(t *testing.T, posture string) {
	e := newEnv(t)
	e.extra = append(e.extra, "NERVE_DAEMON_SANDBOX="+posture)
	work := t.TempDir()
	e.write("agent.sh", tsockAgent)
	if err := os.WriteFile(filepath.Join(work, "late.sh"), []byte(tsockLate), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, _ := os.ReadFile(filepath.Join(work, "late.pid")); posture == "none" && processLives(string(b), posture) {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	e.write("nerve.yaml", "adapters:\n  sneaky: {type: exec, command: ["+e.home+"/agent.sh], timeout: 60s}\n"+
		"  prep: {type: exec, command: [echo, prepared]}\n  kid: {type: exec, command: [echo, kid done]}\n")
	e.write("workflows/waiting.yaml", "workflow: waiting\nmoderator: 'last = null ? {\"role\": \"person\", \"instruction\": \"decide\"} : {\"done\": true}'\nroles:\n  person: {human: true, prompt: Decide.}\n")
	e.write("workflows/kid.yaml", "workflow: kid\nmoderator: 'last = null ? {\"role\": \"k\", \"instruction\": \"go\"} : {\"done\": true, \"result\": last.content}'\nroles:\n  k: {adapter: kid, prompt: go}\n")
	e.must(0, "workflow", "run", "waiting", "--detach")
	e.must(0, "workflow", "run", e.write("guarded.yaml", guardedWorkflow), "--workdir", work, "--detach")
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(work, name))
		return string(b)
	}
	t.Cleanup(func() {
		if t.Failed() {
			ents, _ := os.ReadDir(work)
			for _, en := range ents {
				if !en.Type().IsRegular() {
					continue // the FIFO: reading it would block
				}
				t.Logf("%s: %s", en.Name(), read(en.Name()))
			}
			b, _ := os.ReadFile(filepath.Join(e.home, "nerve.log"))
			t.Logf("nerve.log:\n%s", b)
		}
	})
	// A dozen nerve commands (race-built under -race) in one turn: longer
	// than waitFor's bound on a loaded machine.
	for deadline := time.Now().Add(90 * time.Second); !strings.Contains(read("mcp.out"), "exit ") || !fileExists(filepath.Join(work, "late.started")); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the agent's turn to end")
		}
	}

	for name, want := range map[string]string{
		"answer":      "refused: this answer comes from inside a running turn (guarded#thread-2 step 3); an agent never approves its own work",
		"answerother": "refused: a turn reads only its own thread (guarded#thread-2) and the children it started, not thread-1",
		"other":       "refused: a turn reads only its own thread (guarded#thread-2) and the children it started, not thread-1",
		"list":        "refused: a turn's channel to nerve serves its own thread, notices, child workflows and knowledge queries, not GET /v1/threads",
		"stop":        "not POST /v1/shutdown",
		"status":      "not GET /v1/status",
		"escaped":     "refused: this answer comes from inside a running turn (guarded#thread-2 step 3); an agent never approves its own work",
	} {
		if got := read(name + ".out"); !strings.Contains(got, want) || !strings.HasSuffix(got, "exit 1\n") || strings.Contains(got, "goroutine ") {
			t.Errorf("%s from inside the turn:\n%s\nwant exit 1 and %q", name, got, want)
		}
	}
	for _, name := range []string{"own", "ownsock"} {
		if got := read(name + ".out"); !strings.Contains(got, `"content":"prepared`) || !strings.HasSuffix(got, "exit 0\n") {
			t.Errorf("its own thread's messages (%s):\n%s", name, got)
		}
	}
	if got := read("run.out"); !strings.Contains(got, `"status":"completed"`) || !strings.Contains(got, "kid done") || !strings.HasSuffix(got, "exit 0\n") {
		t.Errorf("a child from inside the turn:\n%s", got)
	}
	mcpOut := read("mcp.out")
	for id, want := range map[int]string{
		2: `"level":"info"`,
		3: "refused: a turn reads only its own thread (guarded#thread-2) and the children it started, not thread-1",
		4: `"status":"completed"`,
	} {
		if line := rpcLine(mcpOut, id); !strings.Contains(line, want) {
			t.Errorf("nerve mcp inside the turn, call %d: %s\nwant %q\n%s", id, line, want, mcpOut)
		}
	}
	logs := e.must(0, "workflow", "logs", "guarded#thread-2").stdout
	if !strings.Contains(logs, "from inside the turn") {
		t.Errorf("the MCP notice is not in the thread's trace:\n%s", logs)
	}
	if in := waitInbox(t, e, 2); len(in.Waiting) != 2 {
		t.Fatalf("the human turns no longer wait: %+v", in)
	}
	if log, _ := os.ReadFile(filepath.Join(e.home, "nerve.log")); !strings.Contains(string(log), `turn socket refused a request thread=guarded#thread-2 step=3 request="POST /v1/shutdown"`) {
		t.Errorf("the daemon's log does not say what the turn tried:\n%s", log)
	}
	sock := strings.TrimSpace(read("socket.path"))
	if sock == "" || !strings.HasPrefix(sock, e.home) {
		t.Fatalf("the turn's socket was %q", sock)
	}

	// The person answers; the thread completes, and its turn's socket is
	// gone.
	e.must(0, "thread", "answer", "guarded#thread-2", "yes", "--step", "2", "--meta", `{"approved": true}`)
	e.must(0, "workflow", "logs", "guarded#thread-2", "-f")
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the turn's socket outlived its turn: %v", err)
	}
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		c.Close()
		t.Errorf("the turn's socket answers after its turn")
	}
	os.WriteFile(filepath.Join(work, "ended"), nil, 0o600)
	// What the turn left behind is killed (the reaper; in bwrap, its pid
	// namespace) or, if it still runs, reaches nothing.
	waitFor(t, "the left-behind process to end or try", func() bool {
		return strings.Contains(read("late.out"), "exit ") || !processLives(read("late.pid"), posture)
	})
	if got := read("late.out"); got != "" && (!strings.Contains(got, "the turn's channel to nerve does not answer") || !strings.HasSuffix(got, "exit 1\n")) {
		t.Errorf("after the turn, a process it left behind:\n%s", got)
	}
}

// rpcLine is the JSON-RPC answer with id in out.
func rpcLine(out string, id int) string {
	for _, l := range strings.Split(out, "\n") {
		var m struct {
			ID int `json:"id"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.ID == id {
			return l
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// processLives reports whether the left-behind process of pid still
// runs; inside bwrap the number is its namespace's, and the namespace
// ends with the turn.
func processLives(pid, posture string) bool {
	pid = strings.TrimSpace(pid)
	if posture == "bwrap" || pid == "" {
		return false
	}
	cmd, err := os.ReadFile("/proc/" + pid + "/cmdline") // not a pid reused since
	return err == nil && strings.Contains(string(cmd), "late.sh")
}

// A turn's socket that answers no more (its turn ended, or a variable
// pointing nowhere) is one line and a hint, exit 1: no daemon is started
// in its stead, and none is looked for in NERVE_HOME.
func TestE2ETurnSocketGone(t *testing.T) {
	e := newEnv(t)
	e.extra = append(e.extra, "NERVE_TURN_SOCKET="+filepath.Join(e.home, "gone.sock"), "NERVE_THREAD=w#thread-1")
	for _, args := range [][]string{{"thread", "messages"}, {"workflow", "run", "w"}, {"thread", "answer", "w#thread-1", "yes"}} {
		r := e.must(1, args...)
		want := "nerve: the turn's channel to nerve does not answer (NERVE_TURN_SOCKET=" + filepath.Join(e.home, "gone.sock") + "): its turn has ended\n" +
			"hint: a turn reaches nerve only while it runs\n"
		if r.stderr != want || r.stdout != "" {
			t.Errorf("nerve %s: %s\nwant stderr %q", strings.Join(args, " "), r, want)
		}
	}
	if e.daemonPID() != 0 || fileExists(filepath.Join(e.home, "nerve.sock")) {
		t.Fatal("a daemon was started for a turn whose socket is gone")
	}
}
