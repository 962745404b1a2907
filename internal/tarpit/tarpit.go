package tarpit

import (
	"net"
	"testing"
)

// Listen accepts connections on loopback and never answers them, until
// the test ends; it returns the address, host:port.
func Listen(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	tb.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}
