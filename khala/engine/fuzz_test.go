package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// fuzzModerator reads the answer the way real moderators do: meta fields,
// the error, string joins and comparisons on agent-controlled values.
const fuzzModerator = `workflow: review
binding: cloud
moderator: |
  (
    $findings := $join(last.meta.findings, "; ");
    last.error ? {"fail": "the " & last.role & " failed: " & last.error.message}
    : last.meta.approved = true ? {"done": true, "result": {"rounds": $count(messages), "content": last.content}}
    : $count(messages) >= 5 ? {"fail": "not approved: " & $findings}
    : last.meta.next ? {"role": last.meta.next, "instruction": $string(last.meta.instruction)}
    : {"role": "reviewer", "instruction": "again: " & $findings & " " & last.content}
  )
roles:
  reviewer: {prompt: You review.}
limits:
  max_steps: 10
`

// Whatever an agent answers, the moderator's verdict is a next turn, an
// end, or a failure that names the workflow; never a panic or a thread
// left without a way forward.
func FuzzModeratorInput(f *testing.F) {
	for _, s := range []struct{ content, meta, err string }{
		{"looks fine", `{"approved": true}`, ""},
		{"", `{"approved": false, "findings": ["a", "b"]}`, ""},
		{"x", `{"findings": [1, {"a": null}], "approved": "yes"}`, ""},
		{"x", `{"next": "reviewer", "instruction": {"deep": [1,2,3]}}`, ""},
		{"x", `{"next": "ghost"}`, ""},
		{"x", `{"next": 42}`, ""},
		{"x", `[1, 2, 3]`, ""},
		{"x", `"just a string"`, ""},
		{"x", `null`, "adapter died"},
		{"\x00\xff", `{"findings": "not a list"}`, ""},
		{strings.Repeat("long ", 1000), `{"approved": 1e308}`, ""},
		{"x", `not json`, ""},
	} {
		f.Add(s.content, []byte(s.meta), s.err)
	}
	def, err := workflow.ParseSource("fuzz", []byte(fuzzModerator))
	if err != nil {
		f.Fatal(err)
	}
	hash := SourceHash([]byte(fuzzModerator))
	defs := newDefCache(nil)
	defs.put(hash, def)
	f.Fuzz(func(t *testing.T, content string, meta []byte, errMsg string) {
		now := time.Now().UTC()
		c, err := startThread(context.Background(), def, hash, "thread-1", map[string]any{}, nil, "", "fuzzer", nil, 0, fuzzRouting(), now)
		if err != nil || len(c.Turns) != 1 {
			t.Fatalf("start: %v %+v", err, c)
		}
		tk := c.Turns[0]
		tk.State, tk.Claim, tk.Agent, tk.ClaimedAt, tk.LeaseExpires = khaladb.TurnClaimed, "claim", "fuzzer", now, now.Add(time.Minute)
		v := &khaladb.ThreadView{Thread: c.Thread, Turns: []khaladb.Turn{tk}}
		m := workflow.Message{Content: content}
		if json.Valid(meta) {
			json.Unmarshal(meta, &m.Meta)
		}
		if errMsg != "" {
			m.Error = &workflow.MessageError{Kind: "agent", Message: errMsg}
		}
		ch, err := answer(context.Background(), defs, nil, v, tk.ID, AnswerRequest{Claim: "claim", Agent: "fuzzer", Message: m}, fuzzRouting(), now)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		th := ch.Thread
		switch th.Status {
		case workflow.StatusRunning:
			if len(th.Pending) == 0 || len(ch.Turns) < 2 {
				t.Fatalf("running with nothing queued: %+v", th)
			}
		case workflow.StatusCompleted:
		case workflow.StatusFailed:
			if th.Error == "" {
				t.Fatal("failed without a reason")
			}
		default:
			t.Fatalf("status %q", th.Status)
		}
		if _, err := json.Marshal(ch); err != nil {
			t.Fatalf("the change cannot be stored: %v", err)
		}
	})
}

// fuzzRouting has ids for any child threads a moderator may start.
func fuzzRouting() routing {
	return routing{ids: &reservedIDs{ids: []string{"thread-2", "thread-3", "thread-4", "thread-5"}}}
}
