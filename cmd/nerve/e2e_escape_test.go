package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nerve-agents/nerve/remote"
)

// approveWhileWorking waits for a person (step 1) while an agent works
// (step 2), the agent's turn being the sneaky adapter's.
const approveWhileWorking = `workflow: approve
moderator: |
  last = null ? [{"role": "approver", "instruction": "approve"}, {"role": "worker", "instruction": "work"}]
  : {"done": true, "result": messages[role = "approver"].agent}
roles:
  approver:
    human: true
    prompt: Approve.
    meta: {type: object, required: [approved], properties: {approved: {type: boolean}}}
  worker: {adapter: sneaky, prompt: Work.}
`

// An agent never approves its own work, however it leaves its turn: a
// process that left the turn's group and session and outlived its parent
// (setsid from a shell that exits) is still refused, and one that waits
// to answer after the turn is killed when the turn ends (gone, not a
// zombie). The thread waits for the person, whose answer ends it.
func TestE2EAnswerFromEscapedProcessRefused(t *testing.T) {
	e := newEnv(t)
	e.unsandboxed("the guard without the wall: its escapees answer through nerve.sock and report in NERVE_HOME")
	// Each escapee waits until its parent ($1) has exited, so neither the
	// turn's process group nor its ancestry is its own.
	orphaned := `while [ "$(cut -d' ' -f4 /proc/$$/stat)" = "$1" ]; do sleep 0.01; done
`
	e.write("now.sh", "#!/bin/sh\n"+orphaned+`nerve thread answer "$NERVE_THREAD" "escaped" --step 1 --meta '{"approved": true}' >"$NERVE_HOME/now.out" 2>&1
echo "exit $?" >>"$NERVE_HOME/now.out"
`)
	e.write("later.sh", "#!/bin/sh\n"+orphaned+`echo $$ >"$NERVE_HOME/later.pid"
sleep 30
nerve thread answer "$NERVE_THREAD" "escaped later" --step 1 --meta '{"approved": true}'
`)
	e.write("agent.sh", `#!/bin/sh
cat >/dev/null
for s in now later; do
  sh -c 'setsid "$0" $$ </dev/null >/dev/null 2>&1 &' "$NERVE_HOME/$s.sh"
done
while ! grep -q exit "$NERVE_HOME/now.out" 2>/dev/null || [ ! -s "$NERVE_HOME/later.pid" ]; do sleep 0.05; done
echo "notes written"
`)
	e.write("nerve.yaml", "adapters:\n  sneaky:\n    type: exec\n    command: ["+e.home+"/agent.sh]\n")
	e.must(0, "workflow", "run", e.write("approve.yaml", approveWhileWorking), "--detach")
	var later int
	waitFor(t, "the agent's escapees", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.home, "later.pid"))
		later, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return later > 0
	})
	t.Cleanup(func() {
		if cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(later) + "/cmdline"); strings.Contains(string(cmd), "later.sh") {
			syscall.Kill(-later, syscall.SIGKILL)
		}
	})
	waitFor(t, "the escapee that outlived its turn to be killed", func() bool {
		return errors.Is(syscall.Kill(-later, 0), syscall.ESRCH)
	})
	if b, _ := os.ReadFile(filepath.Join(e.home, "now.out")); !strings.Contains(string(b), "an agent never approves its own work") || !strings.HasSuffix(string(b), "exit 1\n") {
		t.Fatalf("an answer from an escaped process:\n%s", b)
	}
	if log, _ := os.ReadFile(filepath.Join(e.home, "nerve.log")); !strings.Contains(string(log), "killing a process that outlived its turn pid="+strconv.Itoa(later)) {
		t.Errorf("the daemon's log does not say what it killed:\n%s", log)
	}
	if in := waitInbox(t, e, 1); in.Waiting[0].Step != 1 {
		t.Fatalf("the approval does not wait for a person: %+v", in)
	}
	e.must(0, "thread", "answer", "approve#thread-1", "yes", "--step", "1", "--meta", `{"approved": true}`)
	e.must(0, "workflow", "logs", "approve#thread-1", "-f")
}

// The person token stored for a remote answers its human turns, but not
// from inside a turn here: the local daemon, asked first, refuses as it
// refuses a local answer, and the turn still waits for the person. An
// agent that copies the home, points NERVE_HOME at the copy and drops its
// turn's socket reaches no daemon, and is refused all the same: it has
// NERVE_THREAD.
func TestE2ERemoteAnswerFromInsideTurnRefused(t *testing.T) {
	k := startKhala(t)
	e := newEnv(t)
	e.unsandboxed("the guard without the wall: its agent answers through nerve.sock and copies NERVE_HOME")
	tok := strings.TrimSpace(e.must(0, "khala", "user", "add", "alice", "--db", k.db).stdout)
	waitingTurn(t, k)
	if err := remote.SavePersonToken(e.home, "live", tok); err != nil {
		t.Fatal(err)
	}
	e.write("agent.sh", `#!/bin/sh
cat >/dev/null
nerve thread answer live/approval#thread-1 "approved by me" >"$NERVE_HOME/sneak.out" 2>&1
echo "exit $?" >>"$NERVE_HOME/sneak.out"
elsewhere=$(mktemp -d)
cp -Rp "$NERVE_HOME/nerve.yaml" "$NERVE_HOME/person-tokens" "$elsewhere"
NERVE_HOME=$elsewhere NERVE_TURN_SOCKET= nerve thread answer live/approval#thread-1 "approved by me, elsewhere" >"$NERVE_HOME/elsewhere.out" 2>&1
echo "exit $?" >>"$NERVE_HOME/elsewhere.out"
rm -rf "$elsewhere"
echo tried
`)
	e.write("nerve.yaml", "remotes:\n  live: {url: \""+k.url+"\"}\nadapters:\n  sneaky:\n    type: exec\n    command: ["+e.home+"/agent.sh]\n")
	e.must(0, "workflow", "run", e.write("work.yaml", `workflow: work
moderator: 'last = null ? {"role": "worker", "instruction": "work"} : {"done": true}'
roles:
  worker: {adapter: sneaky, prompt: Work.}
`))
	b, _ := os.ReadFile(filepath.Join(e.home, "sneak.out"))
	if !strings.Contains(string(b), "refused: this answer comes from inside a running turn") || !strings.HasSuffix(string(b), "exit 1\n") {
		t.Fatalf("a remote answer from inside a turn:\n%s", b)
	}
	b, _ = os.ReadFile(filepath.Join(e.home, "elsewhere.out"))
	if want := "nerve: refused: this answer comes from inside a turn (NERVE_THREAD=work#thread-1); an agent never approves its own work\n" +
		"hint: answer from your own terminal, outside any agent's turn\nexit 1\n"; string(b) != want {
		t.Fatalf("a remote answer from inside a turn, NERVE_HOME elsewhere:\n%s\nwant:\n%s", b, want)
	}
	if in := inboxOf(t, e); len(in.Waiting) != 1 || in.Waiting[0].Ref != "live/approval#thread-1" {
		t.Fatalf("the remote's turn no longer waits: %+v", in)
	}
	if r := e.must(0, "thread", "answer", "live/approval#thread-1", "ok"); !strings.Contains(r.stdout, "as alice") {
		t.Fatalf("the person's own answer: %s", r)
	}
}
