package adapter

import (
	"strings"

	"github.com/nerve-agents/nerve/internal/usage"
)

// pi (checked against 0.73.1, see testdata/FLAGS.md):
//
//	pi -p --mode json [--model PROVIDER/ID] [args…] POSTURE [PROMPT]
//
// pi reads piped stdin and puts it before the prompt, and takes an
// argument starting with "-" for a flag and one starting with "@" for a
// file to attach; such a prompt, and one too long for the command line,
// goes on stdin instead. The model endpoint is the user's:
// PI_CODING_AGENT_DIR/models.json (default ~/.pi/agent). PI_OFFLINE=1
// stops its update check and install telemetry.
//
// pi has no permission system (its bash runs anything) and no MCP, so
// the postures choose its tools: full keeps them all; workspace drops
// the shell (edits only); read-only keeps the read tools. Without a
// shell pi cannot run nerve's query commands either: give it full on a
// machine that is itself a sandbox if it must read its thread.

var piEnv = []string{"PI_OFFLINE=1"}

func piPosture(perm string) []string {
	switch perm {
	case PermFull:
		return nil
	case PermReadOnly:
		return []string{"--tools", "read,grep,find,ls"}
	default:
		return []string{"--tools", "read,edit,write,grep,find,ls"}
	}
}

func buildPi(a *cliAdapter, req Request) (*invocation, error) {
	args := []string{"-p", "--mode", "json"}
	if a.cfg.Model != "" {
		args = append(args, "--model", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	args = append(args, piPosture(a.info.Permissions)...)
	inv := &invocation{env: piEnv, parser: &piParser{}}
	if len(req.Prompt) > maxArgBytes || strings.HasPrefix(req.Prompt, "-") || strings.HasPrefix(req.Prompt, "@") {
		inv.stdin = &req.Prompt
	} else {
		args = append(args, req.Prompt)
	}
	inv.args = args
	return inv, nil
}

type piMessage struct {
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Model string `json:"model"`
	Usage *struct {
		Input      int64 `json:"input"`
		Output     int64 `json:"output"`
		CacheRead  int64 `json:"cacheRead"`
		CacheWrite int64 `json:"cacheWrite"`
		Cost       struct {
			Total float64 `json:"total"`
		} `json:"cost"`
	} `json:"usage"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
}

type piEvent struct {
	Type    string     `json:"type"`
	ID      string     `json:"id"`
	Message *piMessage `json:"message"`
	IsError bool       `json:"isError"`
}

// piParser reads pi --mode json. pi exits 0 when the model's API failed,
// so the outcome is the last assistant message's stopReason: stop (or
// length) is an answer, toolUse, error and aborted are not.
type piParser struct {
	u     usage.Usage
	cost  float64
	last  *piMessage
	ended bool // agent_end came
}

func (p *piParser) line(line []byte, _ bool) {
	var ev piEvent
	if !jsonLine(line, &ev) {
		return
	}
	switch ev.Type {
	case "session":
		p.u.SessionID = ev.ID
	case "tool_execution_end":
		if ev.IsError {
			p.u.ToolErrors++
		}
	case "message_end":
		m := ev.Message
		if m == nil || m.Role != "assistant" {
			return
		}
		p.last = m
		if m.Model != "" {
			p.u.Model = m.Model
		}
		if u := m.Usage; u != nil {
			p.u.InputTokens = usage.Int(val(p.u.InputTokens) + u.Input + u.CacheWrite)
			p.u.OutputTokens = usage.Int(val(p.u.OutputTokens) + u.Output)
			p.u.CacheReadTokens = usage.Int(val(p.u.CacheReadTokens) + u.CacheRead)
			p.cost += u.Cost.Total
			p.u.CostUSD = cliCost(p.cost, p.u.Tokens())
		}
	case "agent_end":
		p.ended = true
	}
}

func (p *piParser) finish(o outcome) (string, bool, string) {
	switch {
	case p.last == nil:
		return "", false, noResult("assistant message_end", o.lastOut)
	case p.last.StopReason == "error" || p.last.StopReason == "aborted":
		msg := p.last.ErrorMessage
		if msg == "" {
			msg = "the model call ended with " + p.last.StopReason
		}
		return "", false, firstLine(msg, 500)
	case !p.ended:
		return "", false, noResult("agent_end", o.lastOut)
	case p.last.StopReason != "stop" && p.last.StopReason != "length":
		return "", false, "the last message ended with " + p.last.StopReason + ", not an answer"
	}
	var t textBuf
	for _, c := range p.last.Content {
		if c.Type == "text" {
			t.WriteString(c.Text)
		}
	}
	return t.String(), t.truncated, ""
}

func (p *piParser) usage() usage.Usage { return p.u }
