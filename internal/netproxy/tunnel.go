package netproxy

import (
	"bufio"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// sniffWait is how long a tunnel to a host with a secret waits for the
// client's first byte to tell TLS from plain http; a client that says
// nothing first gets a byte-for-byte tunnel.
const sniffWait = 5 * time.Second

// connect answers CONNECT host:port: a byte-for-byte tunnel, or, for a
// host with a secret that the client speaks plain http to (or when the
// bridge asks for TLS upstream), a tunnel forwarded at the HTTP level.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	hostport := r.Host
	if _, port, err := SplitHostPort(hostport); err != nil || port == "" {
		http.Error(w, "nerve proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	if !p.admit(w, hostport) {
		return
	}
	tlsUp := r.Header.Get(UpstreamHeader) == "tls"
	var up net.Conn
	if !tlsUp {
		var err error
		if up, err = p.opts.Dial(r.Context(), "tcp", hostport); err != nil {
			http.Error(w, "nerve proxy: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "nerve proxy: cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		if up != nil {
			up.Close()
		}
		return
	}
	if !p.track(conn) {
		conn.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	defer p.untrack(conn)
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		if up != nil {
			up.Close()
		}
		return
	}
	switch {
	case tlsUp:
		p.serveTunnel(conn, brw.Reader, "https", hostport)
	case p.secretFor(hostport) != nil && !speaksTLS(conn, brw.Reader):
		up.Close()
		p.serveTunnel(conn, brw.Reader, "http", hostport)
	default:
		defer p.adopt(up)()
		// Bytes the server's reader took already go first.
		if n := brw.Reader.Buffered(); n > 0 {
			b, _ := brw.Reader.Peek(n)
			if _, err := up.Write(b); err != nil {
				up.Close()
				return
			}
		}
		pipe(conn, up)
	}
}

// speaksTLS waits for the client's first byte: 0x16 opens a TLS record.
func speaksTLS(c net.Conn, r *bufio.Reader) bool {
	_ = c.SetReadDeadline(time.Now().Add(sniffWait))
	b, err := r.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	return err != nil || b[0] == 0x16
}

// serveTunnel serves HTTP on the tunnel's client side, forwarding each
// request to scheme://hostport.
func (p *Proxy) serveTunnel(c net.Conn, r *bufio.Reader, scheme, hostport string) {
	ln := &oneConn{conn: &bufConn{Conn: c, r: r}, done: make(chan struct{})}
	srv := &http.Server{Handler: p.forwarder(scheme, hostport), ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slogErrorLog(p.opts.Log)}
	_ = srv.Serve(ln)
	<-ln.done // the server closed the connection
}

// forwarder forwards requests to scheme://hostport, streaming the answer
// as it comes (a model's server-sent events), with the host's secret.
func (p *Proxy) forwarder(scheme, hostport string) http.Handler {
	sec := p.secretFor(hostport)
	host := hostport
	if h, port, _ := net.SplitHostPort(hostport); scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		host = h
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = scheme, hostport, host
			if sec != nil {
				name, value := sec.header()
				pr.Out.Header.Set(name, value)
			}
		},
		Transport:     p.tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				p.opts.Log.Debug("sandbox proxy: upstream failed", "host", hostport, "err", err)
			}
			http.Error(w, "nerve proxy: "+hostport+": "+err.Error(), http.StatusBadGateway)
		},
	}
}

// bufConn reads what a bufio.Reader holds before the connection itself.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConn is a listener of one connection, for serving HTTP on a tunnel:
// Accept returns it once, then waits until it is closed.
type oneConn struct {
	mu   sync.Mutex
	conn net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return &closeNotify{Conn: c, l: l}, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *oneConn) Addr() net.Addr { return &net.UnixAddr{Name: "tunnel", Net: "unix"} }

type closeNotify struct {
	net.Conn
	l *oneConn
}

func (c *closeNotify) Close() error { err := c.Conn.Close(); c.l.Close(); return err }

// slogErrorLog routes net/http's own complaints to the proxy's logger at
// debug level: a client that hangs up mid-request is no news.
func slogErrorLog(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelDebug)
}
