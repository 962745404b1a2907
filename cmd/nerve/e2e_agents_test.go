package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The code-review variant with Claude Code as author and Codex as reviewer,
// run through the daemon with fake CLIs that print the real CLIs' captured
// event streams: the adapters' parsing, usage and the extract of the
// reviewer's json block are all on the real path.
func TestE2EAgentsVariantWithFakeCLIs(t *testing.T) {
	e := newEnv(t)
	td := repoFile(t, "adapter/testdata")
	// codex: the captured stream, its last agent_message replaced by an approval.
	raw, err := os.ReadFile(td + "/codex-success.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.Contains(l, `"agent_message"`) {
			msg, _ := json.Marshal(map[string]any{"type": "item.completed", "item": map[string]any{
				"id": "item_1", "type": "agent_message", "text": "Approved.\n```json\n{\"approved\": true, \"findings\": []}\n```\n"}})
			l = string(msg)
		}
		lines = append(lines, l)
	}
	codexOut := e.write("codex.jsonl", strings.Join(lines, "\n")+"\n")
	e.write("bin/claude", fmt.Sprintf("#!/bin/sh\n[ \"$1\" = -p ] || exit 9\ncat %s/claude-success.jsonl\n", td))
	e.write("bin/codex", fmt.Sprintf("#!/bin/sh\n[ \"$1\" = exec ] || exit 9\ncat %s\n", codexOut))
	e.extra = []string{"PATH=" + e.home + "/bin:" + os.Getenv("PATH")}
	// The fake CLIs print captured streams: the sandbox shows them those.
	e.write("nerve.yaml", fmt.Sprintf("sandbox: {read: [%s, %s]}\n", td, codexOut))

	r := e.must(0, "workflow", "run", repoFile(t, "examples/code-review-agents.yaml"), "-i", "change=x", "--json")
	out := decodeRun(t, r)
	if out.Status != "completed" || out.Result.(map[string]any)["rounds"] != float64(1) {
		t.Fatalf("outcome: %s", r)
	}
	msgs := e.must(0, "thread", "messages", "code-review-agents#thread-1", "--json")
	var author, reviewer struct {
		Content string         `json:"content"`
		Adapter string         `json:"adapter"`
		Usage   map[string]any `json:"usage"`
	}
	ls := strings.Split(strings.TrimSpace(msgs.stdout), "\n")
	json.Unmarshal([]byte(ls[0]), &author)
	json.Unmarshal([]byte(ls[1]), &reviewer)
	if author.Content != "Hello from the stub model." || author.Adapter != "claude" || author.Usage["cost_usd"] != 0.00062 || author.Usage["session_id"] == nil {
		t.Fatalf("claude message: %s", ls[0])
	}
	if reviewer.Adapter != "codex" || reviewer.Usage["input_tokens"] != float64(240) || reviewer.Usage["tool_errors"] != float64(1) {
		t.Fatalf("codex message: %s", ls[1])
	}
}
