package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	if err := overlay(cfg, getenv, opts.Flags); err != nil {
		return nil, err
	}
	finish(cfg)
	if errs := Validate(cfg, lines); len(errs) > 0 {
		return nil, errs
	}
	return cfg, nil
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
}

func overlay(cfg *Config, getenv func(string) string, flags *pflag.FlagSet) error {
	v := viper.New()
	v.SetEnvPrefix("NERVE")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	for key, flag := range overlayKeys {
		envName := "NERVE_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if val := getenv(envName); val != "" {
			v.Set(key, val) // explicit Set: getenv may not be os.Getenv
		}
		if flags != nil {
			if f := flags.Lookup(flag); f != nil && f.Changed {
				if err := v.BindPFlag(key, f); err != nil {
					return err
				}
			}
		}
	}
	var err error
	set := func(key string, apply func(string) error) {
		if err == nil && v.IsSet(key) {
			if e := apply(v.GetString(key)); e != nil {
				err = fmt.Errorf("%s (from environment or flag): %w", key, e)
			}
		}
	}
	set("agent.name", func(s string) error { cfg.Agent.Name = s; return nil })
	set("agent.max_concurrent_turns", func(s string) error {
		var n int
		if _, e := fmt.Sscan(s, &n); e != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		cfg.Agent.MaxConcurrentTurns = n
		return nil
	})
	set("log.level", func(s string) error { cfg.Log.Level = s; return nil })
	set("log.format", func(s string) error { cfg.Log.Format = s; return nil })
	set("daemon.shutdown_grace", func(s string) error {
		d, e := time.ParseDuration(s)
		cfg.Daemon.ShutdownGrace = yamlfile.Duration(d)
		return e
	})
	if err != nil {
		return &usageErr{err}
	}
	return nil
}

type usageErr struct{ error }

func (e *usageErr) ExitCode() int { return 2 }
func (e *usageErr) Unwrap() error { return e.error }
