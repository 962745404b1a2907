package khala

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Where webhooks may go. A thread's creator names the URL, and Khala posts
// to it from the serving machine: without a policy that is a way to reach
// what only this machine can (its loopback services, the cloud's metadata
// endpoint, Khala's own API from inside). So by default these are refused,
// at thread creation (400) and again at delivery, on the IP actually
// dialed (a name may resolve elsewhere later: DNS rebinding):
//
//   - loopback (127.0.0.0/8, ::1) and unspecified (0.0.0.0, ::);
//   - link-local (169.254.0.0/16 with the metadata endpoints, fe80::/10)
//     and multicast;
//   - this machine's own interface addresses.
//
// Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7) stay allowed:
// teams run receivers on their LAN. WebhookAllow (`nerve khala serve
// --webhook-allow CIDR|HOST`) widens the default.

// WebhookAllow is what the operator allows beyond the default: networks,
// and host names allowed whatever they resolve to.
type WebhookAllow struct {
	nets  []netip.Prefix
	hosts []string
}

// ParseWebhookAllow reads entries of --webhook-allow: a CIDR
// (127.0.0.0/8), an IP (127.0.0.1) or a host name (hooks.internal).
func ParseWebhookAllow(entries []string) (WebhookAllow, error) {
	var a WebhookAllow
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			a.nets = append(a.nets, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			a.nets = append(a.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		if !validHostName(e) {
			return WebhookAllow{}, fmt.Errorf("%q: want a CIDR (10.1.0.0/16), an IP or a host name", e)
		}
		a.hosts = append(a.hosts, normHost(e))
	}
	return a, nil
}

func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// allowsHost: the operator named this host.
func (a WebhookAllow) allowsHost(host string) bool {
	return slices.Contains(a.hosts, normHost(host))
}

// refusal says why ip may not receive webhooks, or "".
func (a WebhookAllow) refusal(ip netip.Addr) string {
	ip = ip.Unmap()
	for _, p := range a.nets {
		if p.Contains(ip) {
			return ""
		}
	}
	switch {
	case ip.IsLoopback():
		return ip.String() + " is a loopback address"
	case ip.IsUnspecified():
		return ip.String() + " is this machine (unspecified address)"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return ip.String() + " is link-local (where cloud metadata lives)"
	case ip.IsMulticast():
		return ip.String() + " is a multicast address"
	case slices.Contains(ownAddrs(), ip):
		return ip.String() + " is this server's own address"
	}
	return ""
}

// checkTarget refuses a webhook URL whose host is, or resolves to, a
// refused address. A name that does not resolve now is let through: the
// check at delivery still applies.
func (a WebhookAllow) checkTarget(ctx context.Context, u *url.URL) string {
	host := u.Hostname()
	if a.allowsHost(host) {
		return ""
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return a.refusal(ip)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return ""
	}
	for _, ip := range ips {
		if why := a.refusal(ip); why != "" {
			return fmt.Sprintf("%s resolves to %s", host, why)
		}
	}
	return ""
}

// errWebhookRefused marks a delivery the policy refused: it is given up at
// once, as retrying cannot help.
var errWebhookRefused = errors.New("webhook destination refused")

// Deadlines of one delivery: a receiver that does not accept, or accepts
// and never answers, holds a worker this long at most.
const (
	webhookConnectTimeout  = 3 * time.Second
	webhookResponseTimeout = 5 * time.Second
)

// newWebhookClient posts webhooks: short deadlines, no redirects (a POST
// must not turn into a GET elsewhere), no proxy from the environment (it
// would dial for us, past the check), and every dial checked against
// allow on the IP it connects to.
func newWebhookClient(allow WebhookAllow, timeout time.Duration) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		d := net.Dialer{Timeout: webhookConnectTimeout}
		if !allow.allowsHost(host) {
			d.Control = func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					return fmt.Errorf("%w: %s", errWebhookRefused, address)
				}
				if why := allow.refusal(ap.Addr()); why != "" {
					return fmt.Errorf("%w: %s", errWebhookRefused, why)
				}
				return nil
			}
		}
		return d.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{
		Proxy: nil, DialContext: dial, ForceAttemptHTTP2: true,
		TLSHandshakeTimeout: webhookConnectTimeout, ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost: webhookPerDest, IdleConnTimeout: 30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: noRedirects}
}

// ownAddrs are this machine's interface addresses, read at most every
// 30s (interfaces come and go; a dial must not list them each time).
func ownAddrs() []netip.Addr {
	own.mu.Lock()
	defer own.mu.Unlock()
	if time.Since(own.at) < 30*time.Second {
		return own.addrs
	}
	own.at, own.addrs = time.Now(), nil
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			own.addrs = append(own.addrs, p.Addr().Unmap())
		}
	}
	return own.addrs
}

var own struct {
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}
