package khala

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nerve-agents/nerve/console"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

// PersonAuth checks a person's token for the web console and returns the
// person's name. Agents', enrollment and admin tokens never reach it:
// they are refused first. The server's own is PersonByToken.
type PersonAuth func(ctx context.Context, token string) (person string, err error)

// consoleSignInHelp tells a person where a console token comes from.
const consoleSignInHelp = "Sign in with your person's token: an operator makes one with 'nerve khala user add NAME'. Agents' tokens cannot sign in."

// consoleHandler serves the web console at / and the API's 404 for
// unknown /v1/ paths.
func (s *Server) consoleHandler(auth PersonAuth) http.Handler {
	c := console.New(console.Options{
		Source:     &consoleSource{s: s},
		Auth:       personOnly(auth),
		Recheck:    s.recheck,
		Title:      "Khala",
		SignInHelp: consoleSignInHelp,
		Logger:     s.log,
		Now:        s.now,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
			return
		}
		c.ServeHTTP(w, r)
	})
}

// personOnly refuses the server's own kinds of token before auth sees
// anything, so no agent can sign in whatever auth accepts.
func personOnly(auth PersonAuth) console.Authenticator {
	return func(ctx context.Context, tok string) (string, error) {
		for _, p := range []string{prefixAgent, prefixEnroll, prefixAdmin} {
			if strings.HasPrefix(tok, p) {
				return "", fmt.Errorf("that is an agent's token: agents cannot sign in to the console; use a person's token ('nerve khala user add NAME')")
			}
		}
		if auth == nil {
			return "", fmt.Errorf("this server has no people's tokens yet ('nerve khala user add NAME')")
		}
		p, err := auth(ctx, tok)
		if errors.Is(err, khaladb.ErrUnauthorized) {
			return "", fmt.Errorf("unknown person token: check it, or ask an operator for a new one ('nerve khala user add NAME')")
		}
		return p, err
	}
}
