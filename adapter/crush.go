package adapter

import "fmt"

// Charm's Crush (0.96.1 on npm; not run: the npm package only downloads
// the binary from GitHub at install, see testdata/FLAGS.md). From its
// source's `crush run`:
//
//	crush run -q [-m PROVIDER/MODEL] [args…] -- PROMPT
//
// -q leaves only the answer on stdout, as plain text, so the exit status
// decides (a failure prints "agent run failed: …"). The model endpoint is
// the user's crush.json / crushrc. `crush run` approves every tool itself
// and takes MCP servers only from its config, so nerve can hold it to no
// posture but full: an instance with workspace or read-only (the default)
// is a configuration error rather than a pretence.

var crushEnv = []string{"CRUSH_DISABLE_METRICS=1", "CRUSH_DISABLE_PROVIDER_AUTO_UPDATE=1"}

func buildCrush(a *cliAdapter, req Request) (*invocation, error) {
	// Validate has made sure of the full posture (kind.fullOnly).
	if len(req.Prompt) > maxArgBytes {
		return nil, fmt.Errorf("the prompt is %d bytes, longer than a command line takes (128 KiB)", len(req.Prompt))
	}
	args := []string{"run", "-q"}
	if a.cfg.Model != "" {
		args = append(args, "-m", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	args = append(args, "--", req.Prompt)
	return &invocation{args: args, env: crushEnv, parser: &textParser{}}, nil
}
