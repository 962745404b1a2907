package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/nerve-agents/nerve/config"
)

// loadWithFlags loads yaml with env and the daemon's flags parsed from args.
func loadWithFlags(t *testing.T, yaml string, env map[string]string, args ...string) (*config.Config, error) {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "nerve.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
	flags.String("log-level", "", "")
	flags.String("name", "", "")
	if err := flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "NERVE_HOME" {
			return home
		}
		return env[k]
	}
	return config.Load(config.LoadOptions{Getenv: getenv, Flags: flags})
}

// A bad value from a flag or the environment is blamed on it, not on the
// line of nerve.yaml it replaced.
func TestBadOverrideNamesItsSource(t *testing.T) {
	const file = "agent:\n  name: laptop-1\nlog:\n  level: info\n"
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag log level", nil, []string{"--log-level", "loud"}, `--log-level "loud": unknown level "loud"`},
		{"empty flag name", nil, []string{"--name", ""}, `--name "": must not be empty`},
		{"flag name Khala refuses", nil, []string{"--name", "a b"}, `--name "a b": must be 1-64 letters`},
		{"env log level", map[string]string{"NERVE_LOG_LEVEL": "loud"}, nil, `NERVE_LOG_LEVEL="loud": unknown level "loud"`},
		{"env capacity", map[string]string{"NERVE_AGENT_MAX_CONCURRENT_TURNS": "lots"}, nil, `NERVE_AGENT_MAX_CONCURRENT_TURNS="lots": want a whole number`},
		{"env grace", map[string]string{"NERVE_DAEMON_SHUTDOWN_GRACE": "soon"}, nil, `NERVE_DAEMON_SHUTDOWN_GRACE="soon": want a duration`},
		{"env sandbox", map[string]string{"NERVE_DAEMON_SANDBOX": "maybe"}, nil, `NERVE_DAEMON_SANDBOX="maybe": unknown sandbox mode "maybe" (want one of auto, bwrap, none)`},
		{"flag over a good env", map[string]string{"NERVE_LOG_LEVEL": "debug"}, []string{"--log-level", "loud"}, `--log-level "loud"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWithFlags(t, file, tc.env, tc.args...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to start %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "nerve.yaml") {
				t.Fatalf("error %q blames nerve.yaml", err)
			}
			var ec interface{ ExitCode() int }
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Fatal("a bad flag or variable must exit 2")
			}
		})
	}
}

// Layers: the file, then the environment, then flags.
func TestFlagOverridesEnv(t *testing.T) {
	cfg, err := loadWithFlags(t, "log: {level: info}\n", map[string]string{"NERVE_LOG_LEVEL": "debug"}, "--log-level", "warn")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Level != "warn" {
		t.Fatalf("log level %q: a flag must win over NERVE_LOG_LEVEL", cfg.Log.Level)
	}
}
