package adapter

import "strings"

// Hermes Agent (Nous Research). Not on npm, so its flags come from its CLI
// reference, not a --help run (see testdata/FLAGS.md):
//
//	hermes chat -q PROMPT -Q [--model M] [--yolo] [args…]
//
// -Q (--quiet) leaves only the final answer on stdout. Hermes has no event
// stream, so its exit status decides. Only the full posture changes
// anything (--yolo skips its dangerous-command approvals); otherwise an
// approval prompt meets /dev/null on stdin and the command is refused.

func buildHermes(a *cliAdapter, req Request) (*invocation, error) {
	args := []string{"chat"}
	if strings.HasPrefix(req.Prompt, "-") {
		// argparse would take a separate "-…" value for an option.
		args = append(args, "--query="+req.Prompt)
	} else {
		args = append(args, "-q", req.Prompt)
	}
	args = append(args, "-Q")
	if a.cfg.Model != "" {
		args = append(args, "--model", a.cfg.Model)
	}
	if a.info.Permissions == PermFull {
		args = append(args, "--yolo")
	}
	args = append(args, a.cfg.Args...)
	return &invocation{args: args, parser: &textParser{}}, nil
}
