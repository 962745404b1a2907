// Package console is the web console: pages rendered on the server with
// html/template, a stylesheet and one small script embedded in the binary
// (no CDN, no build step), served by Khala at / and by `nerve console` for
// the local daemon.
//
// It reads everything through Source, which Khala implements over its
// storage and the command implements over the daemon's socket API; the
// package itself links neither, so both can mount it. A feature a Source
// does not have yet answers ErrNotAvailable, and its page says what it
// will show instead of breaking.
//
// # Security
//
// Sign-in takes a person's token (checked by the Authenticator the host
// gives) and sets an HttpOnly, SameSite=Strict session cookie with an
// expiry (Secure when the request came over TLS); the token is never put
// in a URL, a page or a log. Options.Recheck runs on every signed-in
// request, so a session whose person was removed ends at once. Answers
// to human turns go through Source.Answer, which applies the host's own
// checks (who may answer, the role's meta schema). Every form carries a CSRF token and every
// POST must come from the console's own origin. Pages are escaped by
// html/template and served with a Content-Security-Policy that allows
// only the console's own files: no inline script or style.
//
// # Live updates
//
// A thread's page opens /threads/{id}/live (server-sent events); each
// event carries HTML rendered here from the same templates, which the
// script appends. Without JavaScript the page is complete as served.
package console
