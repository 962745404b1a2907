// Package netproxy is a turn's network when its sandbox has none of its
// own (sandbox.network: allow-list): a proxy the daemon serves on a unix
// socket bound into the sandbox, which admits the hosts of an allow-list
// and refuses the rest, and the bridge that runs inside the sandbox (`nerve
// sandbox-exec`), which offers that socket on the sandbox's loopback, where
// the CLI can reach it: as an HTTP proxy port (HTTPS_PROXY) and, for a model
// endpoint, as the endpoint's own address, so a CLI that ignores proxy
// variables (or bypasses them for localhost) still gets through.
//
// The proxy tunnels CONNECT requests byte for byte (TLS stays end to end)
// and forwards plain-http requests; for a host with a secret it forwards at
// the HTTP level and sets the secret's header, so the agent can use a
// credential it never holds (a bridge forward marked TLS speaks plain http
// inside and the proxy dials TLS upstream). It is a leaf: it imports no
// nerve package.
package netproxy
