package adapter

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// versionTimeout bounds `CLI --version`: a CLI that hangs on it (an update
// prompt, a login) is reported, not waited for.
const versionTimeout = 10 * time.Second

// Availability is whether an adapter instance can run on this machine.
type Availability struct {
	Info
	// Path is where the binary was found.
	Path string `json:"path,omitempty"`
	// Version is the line of `BINARY --version` that names the version
	// (agent CLIs only).
	Version string `json:"version,omitempty"`
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

// installHints say how to get each CLI.
var installHints = map[string]string{
	"claude":   "npm install -g @anthropic-ai/claude-code",
	"codex":    "npm install -g @openai/codex",
	"gemini":   "npm install -g @google/gemini-cli",
	"cursor":   "install Cursor's CLI: curl https://cursor.com/install -fsS | bash",
	"hermes":   "install Hermes' CLI and put it on PATH",
	"qwen":     "npm install -g @qwen-code/qwen-code",
	"opencode": "npm install -g opencode-ai",
	"copilot":  "npm install -g @github/copilot",
	"pi":       "npm install -g @mariozechner/pi-coding-agent",
	"crush":    "npm install -g @charmland/crush (it downloads its binary from GitHub)",
	"kilo":     "npm install -g @kilocode/cli",
	"droid":    "npm install -g @factory/cli",
	"continue": "npm install -g @continuedev/cli",
	"auggie":   "npm install -g @augmentcode/auggie, then auggie login",
}

// Installed reports whether the default binary of built-in type typ is on
// pathEnv, for `nerve init` to list the agent CLIs this machine has.
func Installed(typ, pathEnv string) bool {
	k, ok := kindOf(typ)
	if !ok || k.binary == "" {
		return false
	}
	_, err := lookPath(k.binary, pathEnv, "")
	return err == nil
}

// Check finds an adapter's binary (on pathEnv, as a turn would) and, for
// agent CLIs, asks it for its version within a timeout.
func Check(ctx context.Context, name string, c Spec, pathEnv string) Availability {
	return check(ctx, name, c, pathEnv, false)
}

// CheckInstalled is Check for a CLI found on PATH that no adapter names:
// an npm package's version is read from its package.json instead of
// running it.
func CheckInstalled(ctx context.Context, name string, c Spec, pathEnv string) Availability {
	return check(ctx, name, c, pathEnv, true)
}

func check(ctx context.Context, name string, c Spec, pathEnv string, installed bool) Availability {
	info, err := Inspect(name, c)
	av := Availability{Info: info}
	if err != nil {
		av.Problem = err.Error()
		return av
	}
	path, err := lookPath(info.Binary, pathEnv, "")
	if err != nil {
		av.Problem = err.Error()
		av.Hint = installHints[info.Type]
		if c.Binary != "" || info.Type == "exec" {
			av.Hint = fmt.Sprintf("fix adapters.%s in nerve.yaml", name)
		}
		return av
	}
	av.Path = path
	if info.Type == "exec" {
		av.OK = true
		return av
	}
	if v, ok := npmVersion(path); ok && installed {
		av.OK, av.Version = true, v
		return av
	}
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = mergeEnv(os.Environ(), []string{"PATH=" + pathEnv})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	switch {
	case ctx.Err() != nil:
		av.Problem = fmt.Sprintf("%s --version did not answer within %s", info.Binary, versionTimeout)
	case err != nil:
		av.Problem = fmt.Sprintf("%s --version failed (%v): %s", info.Binary, err, first)
	default:
		av.OK, av.Version = true, versionLine(out.String())
	}
	return av
}

// versionRE is what a version looks like: 0.46.0, v2.1.3, 1.2.
var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bv?\d+\.\d+`) })

// versionLine picks the line of `--version` output that names the
// version: a CLI may print a warning first (codex: "WARNING: proceeding,
// even though we could not update PATH: ..."). Without one, the first line.
func versionLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		l = strings.TrimSpace(l)
		upper := strings.ToUpper(l)
		if strings.HasPrefix(upper, "WARN") || strings.HasPrefix(upper, "ERROR") || strings.HasPrefix(upper, "NOTE") {
			continue
		}
		if versionRE().MatchString(l) {
			return l
		}
	}
	return strings.TrimSpace(lines[0])
}
