package netproxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

func startBridge(t *testing.T, b *Bridge) []string {
	t.Helper()
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}

func get(t *testing.T, cl *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A forward makes the model endpoint's own address answer inside: the
// client needs no proxy support.
func TestBridgeForwardNeedsNoProxySupport(t *testing.T) {
	up := startUpstream(t, false)
	host := strings.TrimPrefix(up.URL, "http://")
	tp := startProxy(t, []string{host}, nil, nil)
	var log bytes.Buffer
	var mu sync.Mutex
	addrs := startBridge(t, &Bridge{Socket: tp.socket, Log: lockedWriter{&mu, &log},
		Forwards: []Forward{{Listen: "127.0.0.1:0", Target: host}, {Listen: "127.0.0.1:0", Target: "127.0.0.1:1"}}})

	if code, body := get(t, http.DefaultClient, "http://"+addrs[0]+"/v1/messages"); code != 200 || !strings.Contains(body, "data: 2") {
		t.Fatalf("through the forward: %d %s", code, body)
	}
	// A forward to a host the proxy refuses: the connection ends, and the
	// refusal is on the bridge's log (the CLI's stderr).
	if _, err := http.Get("http://" + addrs[1] + "/"); err == nil {
		t.Error("a forward to a refused host answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(log.String(), "127.0.0.1:1: 403 Forbidden") {
		t.Errorf("bridge log: %q", log.String())
	}
}

// A TLS forward: the agent speaks plain http inside with a placeholder
// key, the proxy speaks TLS upstream with the real one.
func TestBridgeTLSForwardAddsTheSecret(t *testing.T) {
	up := startUpstream(t, true)
	host := strings.TrimPrefix(up.URL, "https://")
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	tp := startProxy(t, []string{host}, []Secret{{Host: "127.0.0.1", Header: "x-api-key", Value: "real-key"}}, &tls.Config{RootCAs: roots})
	addrs := startBridge(t, &Bridge{Socket: tp.socket, Forwards: []Forward{{Listen: "127.0.0.1:0", Target: host, TLS: true}}})

	req, _ := http.NewRequest("GET", "http://"+addrs[0]+"/v1/messages", nil)
	req.Header.Set("X-Api-Key", "placeholder")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "data: 2") {
		t.Fatalf("through the TLS forward: %s %s", resp.Status, body)
	}
	if got := up.seen(); len(got) != 1 || got[0] != host+" real-key|" {
		t.Errorf("upstream saw %q, want the real key over TLS", got)
	}
}

// The proxy port speaks the proxy protocol end to end: HTTPS_PROXY for
// a TLS host, HTTP_PROXY for a plain one, and 403 for the rest, as curl
// (which the agents' tools are) sees it.
func TestBridgeProxyPort(t *testing.T) {
	up := startUpstream(t, true)
	plain := startUpstream(t, false)
	tp := startProxy(t, []string{strings.TrimPrefix(up.URL, "https://"), strings.TrimPrefix(plain.URL, "http://")}, nil, nil)
	addrs := startBridge(t, &Bridge{Socket: tp.socket, Proxy: "127.0.0.1:0"})
	pu, _ := url.Parse("http://" + addrs[0])
	tr := up.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(pu)
	cl := &http.Client{Transport: tr}

	if code, body := get(t, cl, up.URL+"/"); code != 200 || !strings.Contains(body, "data: 2") {
		t.Fatalf("https through the proxy port: %d %s", code, body)
	}
	if code, body := get(t, cl, plain.URL+"/"); code != 200 || !strings.Contains(body, "data: 2") {
		t.Fatalf("http through the proxy port: %d %s", code, body)
	}
	if code, _ := get(t, cl, "http://example.com/"); code != http.StatusForbidden {
		t.Errorf("http://example.com through the proxy port: %d, want 403", code)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	out, err := exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--proxy", pu.String(), "https://example.com/").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "403") {
		t.Errorf("curl https://example.com through the proxy port: %v %s, want a refused CONNECT (403)", err, out)
	}
	if got := strings.Join(tp.refused, " "); got != "example.com example.com" {
		t.Errorf("refusals counted: %q", got)
	}
}
