package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// LoadOptions says where nerve.yaml comes from and what may override it.
type LoadOptions struct {
	// File is an explicit nerve.yaml (--config); a missing explicit file is
	// an error, a missing default one is not.
	File string
	// Getenv reads NERVE_HOME and NERVE_* overrides; nil means os.Getenv.
	Getenv func(string) string
	// Flags, when set, override scalar settings by flag name
	// (--log-level, --name, --max-concurrent-turns).
	Flags *pflag.FlagSet
}

// Defaults returns the configuration used where nerve.yaml says nothing.
func Defaults(home string) *Config {
	host, _ := os.Hostname()
	if CheckAgentName(host) != nil {
		host = "nerve"
	}
	return &Config{
		Agent:   Agent{Name: host, MaxConcurrentTurns: 2},
		Remotes: map[string]Remote{},
		// The examples' deterministic agent: "nerve" in an exec command is
		// the running nerve binary.
		Adapters: map[string]Adapter{"example": {Type: "exec", Command: []string{"nerve", "example-agent"}}},
		Log:      Log{Level: "info", Format: "text"},
		Daemon: Daemon{
			ShutdownGrace: yamlfile.Duration(10 * time.Second),
			StallAfter:    yamlfile.Duration(60 * time.Second),
		},
		Workspace: Workspace{
			FetchTimeout: yamlfile.Duration(2 * time.Minute),
			PushTimeout:  yamlfile.Duration(time.Minute),
			LocalTimeout: yamlfile.Duration(10 * time.Minute),
		},
		Home: home,
	}
}

// Load reads nerve.yaml in layers: defaults, the file, NERVE_* environment
// variables, then flags; then validates the result. Errors name the file,
// the line and the field.
func Load(opts LoadOptions) (*Config, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	home := Home(getenv)
	cfg := Defaults(home)
	file := opts.File
	explicit := file != ""
	if !explicit {
		file = Paths{home}.Config()
	}
	lines := yamlfile.Lines{}
	data, err := os.ReadFile(file)
	switch {
	case err == nil:
		cfg.File = file
		if lines, err = yamlfile.Decode(file, data, cfg); err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		// No nerve.yaml: the embedded defaults are the whole config.
	case errors.Is(err, fs.ErrNotExist):
		return nil, &yamlfile.Error{File: file, Msg: "no such file"}
	default:
		return nil, &yamlfile.Error{File: file, Msg: err.Error()}
	}
	given, err := overlay(cfg, getenv, opts.Flags)
	if err != nil {
		return nil, err
	}
	finish(cfg)
	if errs := Validate(cfg, lines); len(errs) > 0 {
		return nil, blameOverrides(errs, given)
	}
	return cfg, nil
}

// blameOverrides names the flag or environment variable that set a bad
// value, rather than the line of nerve.yaml it replaced: a usage error.
func blameOverrides(errs yamlfile.Errors, given map[string]string) error {
	for _, e := range errs {
		if source, ok := given[e.Field]; ok {
			return &usageErr{fmt.Errorf("%s: %s", source, e.Msg)}
		}
	}
	return errs
}

// finish fills what depends on other settings.
func finish(cfg *Config) {
	if len(cfg.Workflows) == 0 {
		cfg.Workflows = []string{Paths{cfg.Home}.Workflows()}
	}
	for i, w := range cfg.Workflows {
		cfg.Workflows[i] = ExpandHome(w)
	}
	if cfg.Remotes == nil {
		cfg.Remotes = map[string]Remote{}
	}
}

// overlayKeys are the scalar settings that environment variables
// (NERVE_AGENT_NAME, NERVE_LOG_LEVEL, ...) and flags may override. viper
// does the layering; the file itself is decoded strictly above, because
// viper cannot report lines or unknown keys and lowercases map keys.
var overlayKeys = map[string]string{
	"agent.name":                 "name",
	"agent.max_concurrent_turns": "max-concurrent-turns",
	"log.level":                  "log-level",
	"log.format":                 "log-format",
	"daemon.shutdown_grace":      "shutdown-grace",
	"daemon.sandbox":             "sandbox",
}

// overlay applies the overlayKeys set by environment variables, then
// flags, to cfg. It returns each overridden key's source as the user wrote
// it (--log-level "loud", NERVE_LOG_LEVEL="loud"), for errors to name.
func overlay(cfg *Config, getenv func(string) string, flags *pflag.FlagSet) (map[string]string, error) {
	v := viper.New()
	source := map[string]string{} // key -> a format naming where its value comes from
	for key, flag := range overlayKeys {
		envName := "NERVE_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if val := getenv(envName); val != "" {
			// A default, not Set: viper puts Set above flags, and a flag
			// must win over the environment. (getenv may not be os.Getenv,
			// so viper's own env binding cannot read it.)
			v.SetDefault(key, val)
			source[key] = envName + "=%q"
		}
		if flags != nil {
			if f := flags.Lookup(flag); f != nil && f.Changed {
				if err := v.BindPFlag(key, f); err != nil {
					return nil, err
				}
				source[key] = "--" + flag + " %q"
			}
		}
	}
	given := map[string]string{}
	var err error
	set := func(key string, apply func(string) error) {
		if _, ok := source[key]; !ok || err != nil {
			return
		}
		val := v.GetString(key)
		given[key] = fmt.Sprintf(source[key], val)
		if e := apply(val); e != nil {
			err = &usageErr{fmt.Errorf("%s: %w", given[key], e)}
		}
	}
	set("agent.name", func(s string) error { cfg.Agent.Name = s; return nil })
	set("agent.max_concurrent_turns", func(s string) error {
		n, e := strconv.Atoi(s)
		if e != nil {
			return errors.New("want a whole number")
		}
		cfg.Agent.MaxConcurrentTurns = n
		return nil
	})
	set("log.level", func(s string) error { cfg.Log.Level = s; return nil })
	set("log.format", func(s string) error { cfg.Log.Format = s; return nil })
	set("daemon.shutdown_grace", func(s string) error {
		d, e := time.ParseDuration(s)
		if e != nil {
			return errors.New("want a duration such as 90s or 20m")
		}
		cfg.Daemon.ShutdownGrace = yamlfile.Duration(d)
		return nil
	})
	set("daemon.sandbox", func(s string) error { cfg.Daemon.Sandbox = s; return nil })
	return given, err
}

type usageErr struct{ error }

func (e *usageErr) ExitCode() int { return 2 }
func (e *usageErr) Unwrap() error { return e.error }
