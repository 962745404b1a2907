package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Forward is an address the bridge listens on inside the sandbox and
// tunnels, connection by connection, through the proxy to Target.
type Forward struct {
	Listen string // host:port on the sandbox's loopback
	Target string // host:port beyond the proxy
	// TLS: the client speaks plain http to Listen and the proxy speaks TLS
	// to Target (so the proxy can add a secret to each request).
	TLS bool
}

// ParseForward reads "LISTEN" (Target the same address) or
// "LISTEN=TARGET", both host:port.
func ParseForward(s string, tls bool) (Forward, error) {
	listen, target, ok := strings.Cut(s, "=")
	if !ok {
		target = listen
	}
	for _, a := range []string{listen, target} {
		if _, port, err := SplitHostPort(a); err != nil || port == "" {
			return Forward{}, fmt.Errorf("forward %q: %q is not host:port", s, a)
		}
	}
	return Forward{Listen: listen, Target: target, TLS: tls}, nil
}

// Bridge offers the proxy's unix socket on the sandbox's loopback.
type Bridge struct {
	Socket string // the proxy's socket, as bound inside
	// Proxy is the address of a local HTTP proxy port (HTTPS_PROXY): each
	// connection is piped to the socket as is. "" for none.
	Proxy    string
	Forwards []Forward
	// Log gets one line per connection the proxy refused at a forward (the
	// CLI's stderr, where the turn's error tail shows it). Nil: none.
	Log io.Writer

	lns []net.Listener
	wg  sync.WaitGroup
	mu  sync.Mutex
	act map[net.Conn]struct{}
}

// Start listens on every address; the bridge serves until Close.
func (b *Bridge) Start() error {
	b.act = map[net.Conn]struct{}{}
	listen := func(addr string, serve func(net.Conn)) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s inside the sandbox: %w", addr, err)
		}
		b.lns = append(b.lns, ln)
		b.wg.Add(1)
		go b.accept(ln, serve)
		return nil
	}
	if b.Proxy != "" {
		if err := listen(b.Proxy, b.pipeToSocket); err != nil {
			b.Close()
			return err
		}
	}
	for _, f := range b.Forwards {
		if err := listen(f.Listen, func(c net.Conn) { b.forward(c, f) }); err != nil {
			b.Close()
			return err
		}
	}
	return nil
}

// Addrs are the addresses listened on: the proxy port first, if any, then
// each forward's (useful when one asked for port 0).
func (b *Bridge) Addrs() []string {
	out := make([]string, len(b.lns))
	for i, ln := range b.lns {
		out[i] = ln.Addr().String()
	}
	return out
}

// Close stops listening and ends every connection.
func (b *Bridge) Close() {
	for _, ln := range b.lns {
		ln.Close()
	}
	b.mu.Lock()
	for c := range b.act {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *Bridge) accept(ln net.Listener, serve func(net.Conn)) {
	defer b.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		b.mu.Lock()
		b.act[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			serve(c)
			c.Close()
			b.mu.Lock()
			delete(b.act, c)
			b.mu.Unlock()
		}()
	}
}

func (b *Bridge) dial() (net.Conn, error) {
	return net.DialTimeout("unix", b.Socket, 10*time.Second)
}

// pipeToSocket is the proxy port: the client speaks the proxy protocol
// to the daemon's proxy itself.
func (b *Bridge) pipeToSocket(c net.Conn) {
	s, err := b.dial()
	if err != nil {
		b.logf("nerve sandbox-exec: reach the proxy: %v", err)
		return
	}
	pipe(c, s)
}

// forward tunnels c to f.Target with a CONNECT through the socket.
func (b *Bridge) forward(c net.Conn, f Forward) {
	s, err := b.dial()
	if err != nil {
		b.logf("nerve sandbox-exec: reach the proxy: %v", err)
		return
	}
	req := "CONNECT " + f.Target + " HTTP/1.1\r\nHost: " + f.Target + "\r\n"
	if f.TLS {
		req += UpstreamHeader + ": tls\r\n"
	}
	if _, err := io.WriteString(s, req+"\r\n"); err != nil {
		s.Close()
		return
	}
	br := bufio.NewReader(s)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		b.logf("nerve sandbox-exec: %s: the proxy did not answer: %v", f.Target, err)
		s.Close()
		return
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		b.logf("nerve sandbox-exec: %s: %s %s", f.Target, resp.Status, strings.TrimSpace(string(msg)))
		s.Close()
		return
	}
	if n := br.Buffered(); n > 0 { // the proxy answers only after the CONNECT; nothing should be here
		p, _ := br.Peek(n)
		if _, err := c.Write(p); err != nil {
			s.Close()
			return
		}
	}
	pipe(c, s)
}

func (b *Bridge) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, format+"\n", args...)
	}
}
