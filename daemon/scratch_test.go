package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// scratchScript says where the agent works, how private that is, and
// what the thread's earlier turn left there.
const scratchScript = `[ "$NERVE_STEP" = 1 ] && echo left-by-step-1 > note.txt
echo "cwd=$(pwd -P) workdir=$NERVE_WORKDIR mode=$(stat -c %a .) note=$(cat note.txt 2>/dev/null)"
`

// turnPlaces reads each answer of scratchScript.
func turnPlaces(t *testing.T, c *Client, id string) []map[string]string {
	t.Helper()
	msgs, err := c.Messages(context.Background(), id, workflow.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, m := range msgs {
		kv := map[string]string{}
		for _, f := range strings.Fields(m.Content) {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		out = append(out, kv)
	}
	return out
}

// A local thread started with no workdir (as a sense starts one) works in
// a private scratch directory outside NERVE_HOME, the same for each of its
// turns, gone when it ends. One started from inside a scratch directory
// (an agent's `nerve workflow run`, that directory going with its thread)
// gets its own.
func TestScratchLocalThread(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	c, paths := wsDaemon(t, scratchScript)
	writeWorkflow(t, paths, "w", `workflow: w
moderator: '$count(messages) < 2 ? {"role": "dev", "instruction": "go"} : {"done": true}'
roles:
  dev: {adapter: sh, prompt: work}
`)
	ctx := context.Background()
	other, err := workspace.Scratch{Home: paths.Home}.Dir("thread-99", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, workdir := range []string{"", other} {
		th, err := c.Start(ctx, StartRequest{Workflow: "w", Workdir: workdir})
		if err != nil {
			t.Fatal(err)
		}
		if th = waitEnded(t, c, th.ID); th.Status != workflow.StatusCompleted {
			t.Fatalf("thread %+v", th)
		}
		turns := turnPlaces(t, c, th.ID)
		if len(turns) != 2 {
			t.Fatalf("answers %v", turns)
		}
		dir := turns[0]["cwd"]
		rel, err := filepath.Rel(paths.Home, dir)
		if err != nil || !strings.HasPrefix(rel, "..") || dir == other || !strings.HasPrefix(dir, cache) {
			t.Errorf("thread %s (workdir %q) worked in %s: want a scratch directory of its own under %s, away from NERVE_HOME %s",
				th.ID, workdir, dir, cache, paths.Home)
		}
		for _, turn := range turns {
			if turn["cwd"] != dir || turn["workdir"] != dir || turn["mode"] != "700" {
				t.Errorf("turn %v: want NERVE_WORKDIR and the cwd %s, mode 700", turn, dir)
			}
		}
		if turns[1]["note"] != "left-by-step-1" {
			t.Errorf("step 2 did not find step 1's note: %v", turns[1])
		}
		waitUntil(t, "the thread's scratch directory to go", func() bool {
			_, err := os.Stat(dir)
			return os.IsNotExist(err)
		})
	}
}
