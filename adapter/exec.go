package adapter

import (
	"strings"

	"github.com/nerve-agents/nerve/internal/usage"
)

// promptPlaceholder in an exec command's arguments is replaced by the
// prompt; stdin is then /dev/null instead of the prompt.
const promptPlaceholder = "{{prompt}}"

// buildExec runs the owner's own command: the prompt on stdin, or
// substituted for {{prompt}} in its arguments. Its stdout is the content
// and its exit status decides.
func buildExec(a *cliAdapter, req Request) (*invocation, error) {
	argv := append(append([]string(nil), a.cfg.Command[1:]...), a.cfg.Args...)
	substituted := false
	for i, arg := range argv {
		if strings.Contains(arg, promptPlaceholder) {
			argv[i] = strings.ReplaceAll(arg, promptPlaceholder, req.Prompt)
			substituted = true
		}
	}
	inv := &invocation{args: argv, parser: &textParser{}}
	if !substituted {
		p := req.Prompt
		inv.stdin = &p
	}
	return inv, nil
}

// textParser keeps plain stdout as the content; success is exit status 0.
type textParser struct {
	text  textBuf
	lines int
}

func (p *textParser) line(line []byte, cut bool) {
	if p.text.truncated {
		return // past the cap: nothing more is kept
	}
	if p.lines > 0 {
		p.text.WriteString("\n")
	}
	p.lines++
	p.text.WriteString(string(line))
	if cut {
		// The rest of an over-long line was dropped.
		p.text.truncated = true
	}
}

func (p *textParser) finish(o outcome) (string, bool, string) {
	if o.exit != 0 {
		return "", false, "command failed"
	}
	return p.text.String(), p.text.truncated, ""
}

func (p *textParser) usage() usage.Usage { return usage.Usage{} }
