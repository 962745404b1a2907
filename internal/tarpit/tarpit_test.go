package tarpit_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/tarpit"
	"github.com/nerve-agents/nerve/internal/testhome"
)

func TestMain(m *testing.M) { testhome.Main(m) }

// A request to the tarpit is taken and never answered.
func TestListenNeverAnswers(t *testing.T) {
	c, err := net.Dial("tcp", tarpit.Listen(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, err %v: want no answer until the deadline", n, err)
	}
}
