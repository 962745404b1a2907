package netproxy

import "testing"

func TestPolicyAllows(t *testing.T) {
	p, err := NewPolicy([]string{"api.anthropic.com", "127.0.0.1:8080", "*.googleapis.com", "[::1]:9000", "Example.ORG."})
	if err != nil {
		t.Fatal(err)
	}
	for hostport, want := range map[string]bool{
		"api.anthropic.com:443":                    true,
		"API.Anthropic.com.:443":                   true,
		"api.anthropic.com:80":                     true,
		"api.anthropic.com:22":                     false, // a bare host admits 443 and 80 only
		"anthropic.com:443":                        false,
		"evil-api.anthropic.com:443":               false,
		"127.0.0.1:8080":                           true,
		"127.0.0.1:8081":                           false,
		"127.0.0.1:443":                            false,
		"generativelanguage.googleapis.com:443":    true,
		"googleapis.com:443":                       false,
		"googleapis.com.evil.example:443":          false,
		"[::1]:9000":                               true,
		"example.org:443":                          true,
		"api.anthropic.com":                        false, // no port: not a CONNECT target
		"":                                         false,
		"user@api.anthropic.com:443":               false,
		"generativelanguage.googleapis.com:65536":  false,
		"generativelanguage.googleapis.com:0x1bb":  false,
		"generativelanguage.googleapis.com.:443":   true,
		"x.generativelanguage.googleapis.com:443":  true,
		"generativelanguage.googleapis.com:443/xx": false,
	} {
		if got := p.Allows(hostport); got != want {
			t.Errorf("Allows(%q) = %v, want %v", hostport, got, want)
		}
	}
}

func TestPolicyBadPatterns(t *testing.T) {
	for _, s := range []string{"", "*", "*.", "a.*.com", "host:http", "host:70000", "http://host", "a b"} {
		if _, err := NewPolicy([]string{s}); err == nil {
			t.Errorf("NewPolicy(%q) accepted it", s)
		}
	}
}
