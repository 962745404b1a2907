package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/internal/yamlfile"
)

var (
	senseKinds = []string{"khala", "interval", "file"}
	reflexDos  = []string{"turn", "workflow"}
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json", "logfmt"}
	nameRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })
	// agentNameRE is what Khala enrolls an agent under (its agent names):
	// a name it would refuse fails later, at 'nerve init --enroll-token'.
	agentNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })
)

// CheckAgentName says why name cannot be agent.name, or returns nil.
func CheckAgentName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case !agentNameRE().MatchString(name):
		return errors.New("must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// Validate checks the merged configuration and returns every problem, each
// located in the file when lines knows where the field was written.
func Validate(cfg *Config, lines yamlfile.Lines) yamlfile.Errors {
	v := &validator{file: cfg.File, lines: lines}
	if v.file == "" {
		v.file = "nerve.yaml"
	}
	if err := CheckAgentName(cfg.Agent.Name); err != nil {
		v.add("agent.name", "%s", err)
	}
	if cfg.Agent.MaxConcurrentTurns < 1 {
		v.add("agent.max_concurrent_turns", "must be at least 1, got %d", cfg.Agent.MaxConcurrentTurns)
	}
	for _, f := range []struct {
		name string
		d    yamlfile.Duration
	}{{"fetch_timeout", cfg.Workspace.FetchTimeout}, {"push_timeout", cfg.Workspace.PushTimeout}, {"local_timeout", cfg.Workspace.LocalTimeout}} {
		if f.d <= 0 {
			v.add("workspace."+f.name, "must be a positive duration such as 2m, got %s", time.Duration(f.d))
		}
	}
	if cfg.Daemon.MaxSpawnDepth < 0 {
		v.add("daemon.max_spawn_depth", "must not be negative, got %d", cfg.Daemon.MaxSpawnDepth)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Remotes)) {
		p := "remotes." + name
		if !nameRE().MatchString(name) {
			v.add(p, "remote name %q: use letters, digits, '-', '_' and '.'", name)
		}
		u, err := url.Parse(cfg.Remotes[name].URL)
		if cfg.Remotes[name].URL == "" {
			v.add(p+".url", "is required")
		} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(p+".url", "%q is not an http(s) URL", cfg.Remotes[name].URL)
		}
		for i, glob := range cfg.Remotes[name].Repos {
			if _, err := path.Match(glob, ""); err != nil || glob == "" {
				v.add(fmt.Sprintf("%s.repos[%d]", p, i), "%q is not a glob (path.Match: *, ?, [...])", glob)
			}
		}
	}
	if cfg.Daemon.MetricsAddr != "" {
		if err := checkLoopback(cfg.Daemon.MetricsAddr); err != nil {
			v.add("daemon.metrics_addr", "%s", err)
		}
	}
	v.sandbox(cfg)
	for _, name := range slices.Sorted(maps.Keys(cfg.Adapters)) {
		v.adapter(name, cfg.Adapters[name])
		v.caps(name, cfg.Adapters[name])
	}
	senses := map[string]Sense{}
	for i, s := range cfg.Senses {
		p := fmt.Sprintf("senses[%d]", i)
		if s.Name == "" {
			v.add(p+".name", "is required")
		} else if _, dup := senses[s.Name]; dup {
			v.add(p+".name", "sense %q is defined twice", s.Name)
		}
		senses[s.Name] = s
		switch s.Kind {
		case "khala":
			if _, ok := cfg.Remotes[s.Remote]; !ok {
				v.add(p+".remote", "unknown remote %q (remotes: %v)", s.Remote, slices.Sorted(maps.Keys(cfg.Remotes)))
			}
		case "interval":
			if s.Every <= 0 {
				v.add(p+".every", "an interval sense needs every: (e.g. 10m)")
			}
		case "file":
			if len(s.Paths) == 0 {
				v.add(p+".paths", "a file sense needs at least one path")
			}
		default:
			v.add(p+".kind", "unknown kind %q (want one of %v)", s.Kind, senseKinds)
		}
	}
	for i, r := range cfg.Reflexes {
		p := fmt.Sprintf("reflexes[%d]", i)
		if _, ok := senses[r.On]; !ok {
			v.add(p+".on", "unknown sense %q", r.On)
		}
		switch r.Do {
		case "turn":
			if sn, ok := senses[r.On]; ok && sn.Kind != "khala" {
				v.add(p+".do", "do: turn runs turns claimed by a khala sense; %q is %s %s sense", r.On, article(sn.Kind), sn.Kind)
			}
			if r.Adapter == "" {
				v.add(p+".adapter", "do: turn needs an adapter")
			} else if !cfg.HasAdapter(r.Adapter) {
				v.add(p+".adapter", "unknown adapter %q", r.Adapter)
			}
		case "workflow":
			if r.Workflow == "" {
				v.add(p+".workflow", "do: workflow needs a workflow name")
			}
		default:
			v.add(p+".do", "unknown action %q (want one of %v)", r.Do, reflexDos)
		}
	}
	for _, model := range slices.Sorted(maps.Keys(cfg.Pricing)) {
		v.price(model, cfg.Pricing[model])
	}
	v.endpoint("extract", cfg.Extract)
	v.endpoint("knowledge", cfg.Knowledge)
	if !slices.Contains(logLevels, cfg.Log.Level) {
		v.add("log.level", "unknown level %q (want one of %v)", cfg.Log.Level, logLevels)
	}
	if !slices.Contains(logFormats, cfg.Log.Format) {
		v.add("log.format", "unknown format %q (want one of %v)", cfg.Log.Format, logFormats)
	}
	return v.errs
}

// HasAdapter reports whether name is a built-in adapter or configured.
func (c *Config) HasAdapter(name string) bool {
	if _, ok := c.Adapters[name]; ok {
		return true
	}
	return adapter.Builtin(name)
}

// AdapterConfig returns the configuration of adapter name (built-in
// defaults when nerve.yaml does not mention it) and whether it exists.
func (c *Config) AdapterConfig(name string) (Adapter, bool) {
	if a, ok := c.Adapters[name]; ok {
		if a.Type == "" {
			a.Type = name
		}
		return a, true
	}
	if adapter.Builtin(name) && name != "exec" {
		return Adapter{Type: name}, true
	}
	return Adapter{}, false
}

type validator struct {
	file  string
	lines yamlfile.Lines
	errs  yamlfile.Errors
}

func (v *validator) add(field, format string, a ...any) {
	v.errs = append(v.errs, &yamlfile.Error{File: v.file, Line: v.lines.Line(field), Field: field, Msg: fmt.Sprintf(format, a...)})
}

// adapter checks one instance with the adapter package's own rules, so
// what loads here is what adapter.New accepts.
func (v *validator) adapter(name string, a Adapter) {
	var se *adapter.SpecError
	if err := adapter.Validate(name, a); errors.As(err, &se) {
		field := "adapters." + name
		if se.Field != "" {
			field += "." + se.Field
		}
		v.add(field, "%s", se.Msg)
	} else if err != nil {
		v.add("adapters."+name, "%s", err)
	}
}

// caps checks an instance's daily caps: a cap is a ceiling, never
// negative (0 lets no turn start).
func (v *validator) caps(name string, a Adapter) {
	if c := a.DailyUSD; c != nil && (*c < 0 || math.IsNaN(*c) || math.IsInf(*c, 0)) {
		v.add("adapters."+name+".daily_usd", "must be a number of dollars, 0 or more, got %v", *c)
	}
	if c := a.DailyTokens; c != nil && *c < 0 {
		v.add("adapters."+name+".daily_tokens", "must not be negative, got %d", *c)
	}
}

// checkLoopback accepts host:port on a loopback address only: /metrics
// has no token, so it must not be reachable from other machines.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:9464)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: bad port %q", addr, port)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: /metrics has no token, so it listens on 127.0.0.1 or ::1 only", addr)
	}
	return nil
}

func (v *validator) endpoint(section string, e *Endpoint) {
	if e == nil {
		return
	}
	u, err := url.Parse(e.BaseURL)
	if e.BaseURL == "" {
		v.add(section+".base_url", "is required")
	} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(section+".base_url", "%q is not an http(s) URL", e.BaseURL)
	}
	if e.Model == "" {
		v.add(section+".model", "is required")
	}
}

// price checks one model's pricing: USD per million tokens, none negative.
func (v *validator) price(model string, p usage.Price) {
	field := "pricing." + model
	if strings.TrimSpace(model) == "" {
		v.add("pricing", "a model name must not be empty")
		return
	}
	for _, f := range []struct {
		key string
		usd float64
	}{{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead}} {
		if f.usd < 0 || math.IsNaN(f.usd) || math.IsInf(f.usd, 0) {
			v.add(field+"."+f.key, "must be a non-negative USD amount per million tokens, got %v", f.usd)
		}
	}
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
