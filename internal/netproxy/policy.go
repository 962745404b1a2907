package netproxy

import (
	"fmt"
	"net"
	"strings"
)

// Policy is an allow-list of hosts. A pattern is a host ("api.github.com"),
// a host and port ("127.0.0.1:8080") or a suffix ("*.googleapis.com", any
// subdomain, not the domain itself). A pattern without a port admits ports
// 443 and 80 only: "127.0.0.1" must not open every loopback service of the
// machine (the daemon's metrics, a Khala) to the agent.
type Policy struct {
	patterns []pattern
}

type pattern struct {
	host   string // lower case; for a suffix, ".example.com"
	suffix bool
	port   string // "" admits 443 and 80
}

// NewPolicy parses patterns; an empty or malformed one is an error naming it.
func NewPolicy(patterns []string) (*Policy, error) {
	p := &Policy{}
	for _, s := range patterns {
		pt, err := parsePattern(s)
		if err != nil {
			return nil, err
		}
		p.patterns = append(p.patterns, pt)
	}
	return p, nil
}

func parsePattern(s string) (pattern, error) {
	host, port, err := SplitHostPort(s)
	if err != nil {
		return pattern{}, fmt.Errorf("host pattern %q: %w", s, err)
	}
	pt := pattern{host: host, port: port}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if rest == "" || strings.Contains(rest, "*") {
			return pattern{}, fmt.Errorf("host pattern %q: a wildcard is only \"*.\" before a domain", s)
		}
		pt.host, pt.suffix = "."+rest, true
	} else if strings.Contains(host, "*") {
		return pattern{}, fmt.Errorf("host pattern %q: a wildcard is only \"*.\" before a domain", s)
	}
	return pt, nil
}

// SplitHostPort splits "host", "host:port", "[v6]:port" or "v6" into a
// lower-case host without a trailing dot and a port ("" when none).
func SplitHostPort(s string) (host, port string, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", "", fmt.Errorf("empty host")
	}
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
		host = s // a bare IPv6 address
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Contains(s, ":") {
		return "", "", err
	} else {
		host = s
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || strings.ContainsAny(host, "/@ \t") {
		return "", "", fmt.Errorf("not a host name or address")
	}
	if port != "" {
		if n, err := parsePort(port); err != nil || n == 0 {
			return "", "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
	}
	return host, port, nil
}

func parsePort(s string) (int, error) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' || n > 65535 {
			return 0, fmt.Errorf("bad port")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 || s == "" {
		return 0, fmt.Errorf("bad port")
	}
	return n, nil
}

// Allows reports whether hostport ("host:port", as a CONNECT names it)
// is admitted.
func (p *Policy) Allows(hostport string) bool {
	host, port, err := SplitHostPort(hostport)
	if err != nil || port == "" {
		return false
	}
	for _, pt := range p.patterns {
		if pt.port == "" && port != "443" && port != "80" || pt.port != "" && pt.port != port {
			continue
		}
		if pt.suffix && strings.HasSuffix(host, pt.host) || !pt.suffix && host == pt.host {
			return true
		}
	}
	return false
}
