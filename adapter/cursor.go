package adapter

import (
	"encoding/json"
	"strings"

	"github.com/nerve-agents/nerve/internal/usage"
)

// Cursor's agent CLI. It is not on npm, so its flags are taken from
// Cursor's CLI reference, not from a --help run (see testdata/FLAGS.md):
//
//	cursor-agent -p --output-format stream-json --trust [--model M] [args…] POSTURE -- PROMPT
//
// -p is --print; the prompt is positional, after "--". --trust: headless
// runs refuse an untrusted workspace instead of asking. Postures: full is
// --force; read-only is --mode ask; workspace passes nothing, which leaves
// the owner's own Cursor permission config (cli-config.json) in charge.

func buildCursor(a *cliAdapter, req Request) (*invocation, error) {
	args := []string{"-p", "--output-format", "stream-json", "--trust"}
	if a.cfg.Model != "" {
		args = append(args, "--model", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	switch a.info.Permissions {
	case PermFull:
		args = append(args, "--force")
	case PermReadOnly:
		args = append(args, "--mode", "ask")
	}
	args = append(args, "--", req.Prompt)
	return &invocation{args: args, parser: &cursorParser{}}, nil
}

// cursorEvent adds Cursor's tool_call events to the Claude-shaped ones.
type cursorEvent struct {
	claudeEvent
	ToolCall map[string]struct {
		Result map[string]json.RawMessage `json:"result"`
	} `json:"tool_call"`
}

// cursorParser reads Cursor's stream-json, which mirrors Claude Code's: a
// system init, assistant messages (one line per message), tool_call
// started/completed, and a final result. On failure Cursor exits non-zero
// and may print no result at all.
type cursorParser struct {
	u      usage.Usage
	text   textBuf // assistant text, in case the result carries none
	result *claudeEvent
}

func (p *cursorParser) line(line []byte, _ bool) {
	var ev cursorEvent
	if !jsonLine(line, &ev) {
		return
	}
	if ev.SessionID != "" {
		p.u.SessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		if ev.Model != "" {
			p.u.Model = ev.Model
		}
	case "assistant":
		for _, b := range ev.blocks() {
			if b.Type == "text" {
				p.text.WriteString(b.Text)
			}
		}
	case "tool_call":
		if ev.Subtype != "completed" {
			return
		}
		// A completed call's result holds "success" or an error kind
		// ("error", "failure", "rejected", …).
		for _, call := range ev.ToolCall {
			if call.Result == nil {
				continue
			}
			if _, ok := call.Result["success"]; !ok {
				p.u.ToolErrors++
			}
		}
	case "result":
		r := ev.claudeEvent
		p.result = &r
		r.addUsage(&p.u)
	}
}

func (p *cursorParser) finish(o outcome) (string, bool, string) {
	if failure := resultFailure(p.result, o); failure != "" {
		return "", false, failure
	}
	r := p.result
	if strings.TrimSpace(r.Result) == "" {
		return p.text.String(), p.text.truncated, ""
	}
	var t textBuf
	t.WriteString(r.Result)
	return t.String(), t.truncated, ""
}

func (p *cursorParser) usage() usage.Usage { return p.u }
