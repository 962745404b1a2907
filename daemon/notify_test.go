package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The notify endpoint refuses what it cannot put in a trace: a bad level
// or message, a ref that names no thread, an unknown thread, and a remote
// thread this daemon runs no turn of.
func TestNotifyRefusals(t *testing.T) {
	c, _, _ := startDaemon(t)
	ctx := context.Background()
	for _, tc := range []struct {
		req  NotifyRequest
		code string
		want string
	}{
		{NotifyRequest{Thread: "w#thread-1", Level: "loud", Message: "m"}, codeUsage, `level "loud"`},
		{NotifyRequest{Thread: "w#thread-1", Level: "info", Message: " "}, codeUsage, "message is empty"},
		{NotifyRequest{Thread: "w", Level: "info", Message: "m"}, codeUsage, "w names no thread"},
		{NotifyRequest{Thread: "w#thread-9", Level: "info", Message: "m"}, codeNotFound, `unknown thread "thread-9"`},
		{NotifyRequest{Thread: "origin/w#thread-9", Step: 2, Level: "blocking", Message: "m"}, codeConflict, "this agent runs no turn of origin/w#thread-9"},
	} {
		err := c.Notify(ctx, tc.req)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%+v: %v, want %s with %q", tc.req, err, tc.code, tc.want)
		}
	}
}
