package remote

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Listing is one remote's cloud workflows, or why they could not be read.
type Listing struct {
	Remote    string
	Workflows []Workflow
	// Unreachable says why the remote could not be read ("" when it was),
	// so a list shows the remote as unreachable, not as empty.
	Unreachable string
}

// ListAll asks the named remotes for their workflows, all at once and each
// within timeout, so one slow remote delays the answer by that bound at
// most. open returns a remote's client. Listings come in names' order.
func ListAll(ctx context.Context, names []string, timeout time.Duration, open func(name string) (*Client, error)) []Listing {
	out := make([]Listing, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = list(ctx, name, timeout, open)
		}()
	}
	wg.Wait()
	return out
}

func list(ctx context.Context, name string, timeout time.Duration, open func(string) (*Client, error)) Listing {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l := Listing{Remote: name}
	c, err := open(name)
	if err == nil {
		c.Retries = 0 // a listing answers now or says the remote is unreachable
		l.Workflows, err = c.Workflows(ctx)
	}
	if err != nil {
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "remote ") {
			msg = msg[i+2:] // the client's "remote NAME: ..." prefix says what the entry already says
		}
		l.Unreachable = "unreachable: " + msg
	}
	return l
}
