package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"text/template"

	"go.yaml.in/yaml/v3"

	"github.com/nerve-agents/nerve/internal/atomicfile"
)

// initialTmpl is parsed at first use: 'nerve init' is the one command
// that writes it, and package initialisation runs in every process.
var initialTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("nerve.yaml").Parse(initialYAML))
})

const initialYAML = `# nerve.yaml of {{.Name}}, written by 'nerve init'. Every key is optional;
# nerve.yaml.example in the nerve repository documents them all, and
# 'nerve validate' checks this file and your workflows.

agent:
  name: {{.Quoted}}                # how this agent appears in traces
  max_concurrent_turns: 2        # turns this machine runs at once

# Khala servers, added with 'nerve remote add NAME URL' or 'nerve init --remote'.
# Tokens never go here: they live in $NERVE_HOME/tokens (mode 0600).
remotes: {}

# Adapters run agent CLIs: claude, codex, gemini, cursor and hermes are built
# in; override one or add an instance here. permissions: workspace (default),
# read-only or full.
# adapters:
#   claude:
#     timeout: 20m
#   reviewer-bot:
#     type: exec
#     command: ["./bin/review", "--json"]

# Senses and reflexes: what this agent reacts to.
# senses:
#   - {name: origin-turns, kind: khala, remote: origin}
# reflexes:
#   - {on: origin-turns, do: turn, adapter: claude}

log:
  level: info
`

// WriteInitial creates path with a commented nerve.yaml for an agent
// called name, unless the file exists. It reports whether it wrote. It
// holds path's lock, so it cannot replace a file another command (nerve
// remote add) has just written.
func WriteInitial(path, name string) (bool, error) {
	// A valid name is one line, so it cannot break out of the comment; it
	// is still quoted where YAML would read it as another type (null, 1e3).
	if err := CheckAgentName(name); err != nil {
		return false, fmt.Errorf("agent name %q: %w", name, err)
	}
	quoted, err := yaml.Marshal(name)
	if err != nil {
		return false, err
	}
	var b bytes.Buffer
	data := struct{ Name, Quoted string }{name, strings.TrimSuffix(string(quoted), "\n")}
	if err := initialTmpl().Execute(&b, data); err != nil {
		return false, err
	}
	wrote := false
	err = atomicfile.WithLock(path, func() error {
		if _, err := os.Stat(path); err == nil {
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		wrote = true
		return atomicfile.WriteFile(path, b.Bytes(), 0o600)
	})
	return wrote && err == nil, err
}
