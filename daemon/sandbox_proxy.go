package daemon

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/netproxy"
	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/reflex"
)

// Inside a sandbox with sandbox.network: allow-list the proxy's socket is
// here, and the bridge's proxy port on the sandbox's loopback.
const (
	proxySocketInside = "/run/nerve/proxy.sock"
	proxyPortInside   = 3128
)

// netService is the turn service of the network: with sandbox.network:
// allow-list (and a sandbox), a proxy of the turn's own on a unix socket
// bound into the sandbox, admitting the adapter's model endpoints,
// sandbox.hosts and the secrets' hosts, and `nerve sandbox-exec` as the
// prefix that offers it on the sandbox's loopback. In every posture the
// secrets without a host are passed in the turn's environment.
func (d *Daemon) netService(ctx context.Context, t *reflex.Turn, name string) (sandbox.Extra, func(), error) {
	cfg := d.config()
	var extra sandbox.Extra
	var hosted []netproxy.Secret
	for _, s := range cfg.Sandbox.Secrets {
		v, ok := os.LookupEnv(s.Env)
		switch {
		case !ok:
			if d.netSeen.warnOnce(s.Env) {
				d.log.Warn("sandbox secret not set in the daemon's environment", "env", s.Env)
			}
		case s.Host == "":
			extra.Env = append(extra.Env, s.Env+"="+v)
		default:
			hosted = append(hosted, netproxy.Secret{Host: s.Host, Header: s.Header, Value: v})
		}
	}
	if !sandboxedTurn(cfg, name) || cfg.SandboxNetwork() != sandbox.NetAllowList {
		return extra, nil, nil
	}
	if d.opts.Executable == "" {
		return extra, nil, fmt.Errorf("sandbox.network allow-list: the nerve binary is unknown, so no bridge can run inside")
	}
	ac, _ := cfg.AdapterConfig(name)
	plan := planNetwork(cfg, ac, modelEndpoints(ac, cliHome(cfg, d.paths.Home, ac.Type)), hosted)
	pol, err := netproxy.NewPolicy(plan.hosts)
	if err != nil {
		return extra, nil, fmt.Errorf("sandbox.hosts: %w", err)
	}
	dir, err := os.MkdirTemp("", "nerve-net-")
	if err != nil {
		return extra, nil, fmt.Errorf("proxy directory: %w", err)
	}
	log := d.log.With("thread", t.Thread, "step", t.Step, "adapter", name)
	p, err := netproxy.Listen(filepath.Join(dir, "proxy.sock"), netproxy.Options{Policy: pol, Secrets: hosted,
		Log: log, Refused: d.netSeen.add})
	if err != nil {
		os.RemoveAll(dir)
		return extra, nil, err
	}
	end := func() {
		p.Close()
		os.RemoveAll(dir)
	}
	log.Info("sandbox network by allow-list", "hosts", plan.hosts, "bridge", plan.flags)
	proxyURL := "http://127.0.0.1:" + strconv.Itoa(plan.proxyPort)
	extra.Binds = []sandbox.Bind{{Src: filepath.Join(dir, "proxy.sock"), Dst: proxySocketInside}}
	extra.Env = append(extra.Env,
		"HTTPS_PROXY="+proxyURL, "https_proxy="+proxyURL, "HTTP_PROXY="+proxyURL, "http_proxy="+proxyURL,
		// The loopback endpoints answer inside at their own address: no
		// proxy needed, and Node's fetch honours the variables only so.
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1", "NODE_USE_ENV_PROXY=1")
	extra.Env = append(extra.Env, plan.env...)
	extra.Prefix = append([]string{d.opts.Executable, "sandbox-exec", "--proxy", proxySocketInside,
		"--listen-proxy", "127.0.0.1:" + strconv.Itoa(plan.proxyPort)}, plan.flags...)
	extra.Prefix = append(extra.Prefix, "--")
	return extra, end, nil
}

// sandboxedTurn reports whether adapter name's turns run in bwrap, as
// the executor decides it.
func sandboxedTurn(cfg *config.Config, name string) bool {
	eff, _ := sandbox.Effective(cfg.SandboxMode(name))
	return eff == sandbox.ModeBwrap
}

// netPlan is one turn's network: the proxy's allow-list, the bridge's
// forwards (as sandbox-exec flags), the port of its proxy, and variables
// that point the CLI at a TLS forward.
type netPlan struct {
	hosts     []string
	flags     []string
	proxyPort int
	env       []string
}

// planNetwork admits the endpoints, sandbox.hosts and the secrets' hosts;
// forwards each loopback one to its own address inside; and where a
// secret belongs to an https endpoint named by a variable, points the
// variable at a plain-http forward inside whose proxy speaks TLS upstream
// and adds the secret: the CLI never holds it.
func planNetwork(cfg *config.Config, ac config.Adapter, eps []modelEndpoint, secrets []netproxy.Secret) netPlan {
	var pl netPlan
	used := map[int]bool{}
	forwarded := map[string]bool{}
	forward := func(hostport string) {
		host, port, err := netproxy.SplitHostPort(hostport)
		if err != nil || port == "" || !isLoopback(host) || forwarded[hostport] {
			return
		}
		forwarded[hostport] = true
		n, _ := strconv.Atoi(port)
		used[n] = true
		pl.flags = append(pl.flags, "--forward", hostport)
	}
	for _, h := range cfg.Sandbox.Hosts {
		pl.hosts = append(pl.hosts, h)
		forward(h)
	}
	for _, s := range secrets {
		pl.hosts = append(pl.hosts, s.Host)
	}
	for _, e := range eps {
		if e.url.Port() == "" {
			pl.hosts = append(pl.hosts, e.url.Hostname()) // 443 and 80
		} else {
			pl.hosts = append(pl.hosts, hostPort(e.url))
		}
		forward(hostPort(e.url))
	}
	next := func(from int) int {
		for used[from] {
			from++
		}
		used[from] = true
		return from
	}
	pl.proxyPort = next(proxyPortInside)
	seen := map[string]bool{}
	for _, e := range eps {
		if e.envVar == "" || e.url.Scheme != "https" || seen[e.envVar] || !slices.ContainsFunc(secrets, func(s netproxy.Secret) bool {
			h, _, _ := netproxy.SplitHostPort(s.Host)
			return h == e.url.Hostname()
		}) {
			continue
		}
		seen[e.envVar] = true
		inside := net.JoinHostPort("127.0.0.1", strconv.Itoa(next(pl.proxyPort+1)))
		pl.flags = append(pl.flags, "--tls-forward", inside+"="+hostPort(e.url))
		u := url.URL{Scheme: "http", Host: inside, Path: e.url.Path, RawQuery: e.url.RawQuery}
		pl.env = append(pl.env, e.envVar+"="+u.String())
	}
	return pl
}

// netRecord counts the hosts the turns' proxies refused, for
// /metrics: by name for the first maxRefusedHosts, then as "other", so
// an agent trying many names cannot grow the series without bound.
type netRecord struct {
	mu     sync.Mutex
	n      map[string]int64
	warned map[string]bool // secrets' variables found unset, warned of once
}

// warnOnce reports whether name's absence is news.
func (r *netRecord) warnOnce(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned[name] {
		return false
	}
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	r.warned[name] = true
	return true
}

const maxRefusedHosts = 50

func (r *netRecord) add(host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int64{}
	}
	if _, ok := r.n[host]; !ok && len(r.n) >= maxRefusedHosts {
		host = "other"
	}
	r.n[host]++
}

func (r *netRecord) counts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.n))
	for h, n := range r.n {
		out[h] = n
	}
	return out
}
