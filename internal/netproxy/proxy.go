package netproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// UpstreamHeader on a CONNECT asks the proxy to speak TLS to the host
// itself and plain http to the client: the bridge's TLS forwards send it,
// so a secret can be added to requests the agent sends in clear to its
// own loopback. It admits no host the policy does not.
const UpstreamHeader = "Nerve-Upstream"

// Secret is a credential the proxy adds to every request it forwards to
// Host (a host name; any port). The agent never sees Value.
type Secret struct {
	Host   string
	Header string // "" : Authorization: Bearer Value
	Value  string
}

func (s *Secret) header() (name, value string) {
	if s.Header == "" {
		return "Authorization", "Bearer " + s.Value
	}
	return s.Header, s.Value
}

// Options configure a Proxy.
type Options struct {
	Policy  *Policy
	Secrets []Secret
	// Log gets one line per refused host (the first refusal of each;
	// never a secret). Nil: discarded.
	Log *slog.Logger
	// Refused is called on every refusal with the host (no port), for a
	// counter.
	Refused func(host string)
	// Dial dials upstream; nil: a net.Dialer with a 10 s timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS configures the proxy's own TLS to a TLS forward's target (nil:
	// the system's roots).
	TLS *tls.Config
}

// Proxy is one turn's proxy. Its zero value is not usable: see Serve.
type Proxy struct {
	opts Options
	srv  *http.Server
	tr   *http.Transport

	mu      sync.Mutex
	closed  bool
	tunnels map[net.Conn]struct{} // hijacked connections, closed by Close
	logged  map[string]bool       // refused hosts already logged
	wg      sync.WaitGroup
}

// maxLoggedHosts bounds the refused hosts one proxy logs by name.
const maxLoggedHosts = 32

// Listen serves a proxy on a new unix socket at path (mode 0600; its
// directory should be the caller's own, mode 0700).
func Listen(path string, opts Options) (*Proxy, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("proxy socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("proxy socket: %w", err)
	}
	return Serve(ln, opts), nil
}

// Serve serves a proxy on ln until Close.
func Serve(ln net.Listener, opts Options) *Proxy {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Policy == nil {
		opts.Policy = &Policy{}
	}
	if opts.Dial == nil {
		opts.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	p := &Proxy{opts: opts, tunnels: map[net.Conn]struct{}{}, logged: map[string]bool{}}
	p.tr = &http.Transport{DialContext: opts.Dial, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, TLSClientConfig: opts.TLS}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slogErrorLog(opts.Log)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln)
	}()
	return p
}

// Close stops the proxy and ends every connection through it.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.tr.CloseIdleConnections()
	return err
}

// ServeHTTP answers one proxy request: CONNECT host:port, or a plain
// http request in absolute form.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "nerve proxy: only CONNECT and http:// requests in absolute form", http.StatusBadRequest)
		return
	}
	hostport := r.URL.Host
	if _, port, err := SplitHostPort(hostport); err == nil && port == "" {
		hostport = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	if !p.admit(w, hostport) {
		return
	}
	p.forwarder("http", hostport).ServeHTTP(w, r)
}

// admit answers 403 for a host the policy refuses, logs it (once per
// host) and counts it.
func (p *Proxy) admit(w http.ResponseWriter, hostport string) bool {
	if p.opts.Policy.Allows(hostport) {
		return true
	}
	host, _, err := SplitHostPort(hostport)
	if err != nil {
		http.Error(w, "nerve proxy: not a host: "+err.Error(), http.StatusBadRequest)
		return false
	}
	p.mu.Lock()
	first := !p.logged[hostport] && len(p.logged) < maxLoggedHosts
	if first {
		p.logged[hostport] = true
	}
	p.mu.Unlock()
	if first {
		p.opts.Log.Warn("sandbox proxy refused a host", "host", hostport, "hint", "add it to sandbox.hosts")
	}
	if p.opts.Refused != nil {
		p.opts.Refused(host)
	}
	http.Error(w, fmt.Sprintf("nerve: %s is not allowed from this sandbox (sandbox.hosts)", hostport), http.StatusForbidden)
	return false
}

// secretFor is the secret for host, or nil.
func (p *Proxy) secretFor(hostport string) *Secret {
	host, _, err := SplitHostPort(hostport)
	if err != nil {
		return nil
	}
	for i := range p.opts.Secrets {
		if h, _, err := SplitHostPort(p.opts.Secrets[i].Host); err == nil && h == host {
			return &p.opts.Secrets[i]
		}
	}
	return nil
}

// track records a hijacked connection; false when the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.tunnels[c] = struct{}{}
	p.wg.Add(1)
	return true
}

// adopt has Close close c too (a tunnel's upstream: a half-closed tunnel
// whose server never ends would otherwise outlive the proxy); release
// forgets it.
func (p *Proxy) adopt(c net.Conn) (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
	}
	p.tunnels[c] = struct{}{}
	return func() {
		p.mu.Lock()
		delete(p.tunnels, c)
		p.mu.Unlock()
	}
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.tunnels, c)
	p.mu.Unlock()
	p.wg.Done()
}

// pipe copies both ways until both directions end, passing on each
// half-close, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 1)
	go func() {
		_, _ = io.Copy(b, a)
		closeWrite(b)
		done <- struct{}{}
	}()
	_, _ = io.Copy(a, b)
	closeWrite(a)
	<-done
	a.Close()
	b.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// isClosed reports whether err only says the connection was closed.
func isClosed(err error) bool {
	return err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF)
}
