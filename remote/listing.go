package remote

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Listing is one remote's cloud workflows, or why they could not be read.
type Listing struct {
	Remote    string
	Workflows []Workflow
	// Unreachable says why the remote could not be read ("" when it was),
	// so a list shows the remote as such, not as empty: "unreachable: ...",
	// or "token refused: ..." or "no token: ..." when it answered but
	// would not take this machine's token.
	Unreachable string
	// Err is the error behind Unreachable, with its hint.
	Err error
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
		l.Err = err
		l.Unreachable = notRead(name, err, c != nil && c.Token != "")
	}
	return l
}

// notRead says in a few words why remote name's listing could not be
// read. A remote that refuses this machine's token (or gets none)
// answered: it is not unreachable, and the fix is a token, not the network.
func notRead(name string, err error, hadToken bool) string {
	var e *Error
	if !errors.As(err, &e) {
		// The entry names the remote already.
		return "unreachable: " + strings.TrimPrefix(err.Error(), "remote "+name+": ")
	}
	switch {
	case e.Status == http.StatusUnauthorized && !hadToken:
		return "no token: this machine holds none for " + name
	case e.Status == http.StatusUnauthorized:
		return "token refused: " + strings.TrimPrefix(e.Message, "unauthorized: ")
	}
	return "unreachable: " + e.Message
}
