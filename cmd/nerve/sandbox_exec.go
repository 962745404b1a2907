package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/internal/netproxy"
)

// newCmdSandboxExec is the bridge a sandboxed turn's CLI runs under (the
// sandbox's prefix, sandbox.network: allow-list): it offers the daemon's
// proxy socket on the sandbox's loopback, runs the CLI as its child and
// exits with its status. Hidden: only the daemon starts it.
func newCmdSandboxExec(f *Factory, runF func(*sandboxExecOptions) error) *cobra.Command {
	opts := &sandboxExecOptions{}
	c := &cobra.Command{
		Use:    "sandbox-exec --proxy SOCKET [--listen-proxy ADDR] [--forward ADDR[=TARGET]]... -- COMMAND [ARGS...]",
		Short:  "Run a command with the turn's proxy on loopback (inside a turn's sandbox)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Command = args
			if runF != nil {
				return runF(opts)
			}
			return sandboxExecRun(f, opts)
		},
	}
	// The command's own flags are its own, "--" or not.
	c.Flags().SetInterspersed(false)
	c.Flags().StringVar(&opts.Socket, "proxy", "", "the turn's proxy socket")
	c.Flags().StringVar(&opts.ListenProxy, "listen-proxy", "", "address of the HTTP proxy port to offer (HTTPS_PROXY)")
	c.Flags().StringArrayVar(&opts.Forwards, "forward", nil, "ADDR[=TARGET]: tunnel connections to ADDR through the proxy to TARGET (default ADDR)")
	c.Flags().StringArrayVar(&opts.TLSForwards, "tls-forward", nil, "ADDR=TARGET: plain http at ADDR, TLS from the proxy to TARGET")
	return c
}

type sandboxExecOptions struct {
	Socket      string
	ListenProxy string
	Forwards    []string
	TLSForwards []string
	Command     []string
}

func sandboxExecRun(f *Factory, opts *sandboxExecOptions) error {
	b := &netproxy.Bridge{Socket: opts.Socket, Proxy: opts.ListenProxy, Log: f.IO.ErrOut}
	for _, list := range []struct {
		flags []string
		tls   bool
	}{{opts.Forwards, false}, {opts.TLSForwards, true}} {
		for _, s := range list.flags {
			fw, err := netproxy.ParseForward(s, list.tls)
			if err != nil {
				return usageErrorf("", "sandbox-exec: %v", err)
			}
			b.Forwards = append(b.Forwards, fw)
		}
	}
	if opts.Socket == "" && (b.Proxy != "" || len(b.Forwards) > 0) {
		return usageErrorf("", "sandbox-exec: --listen-proxy and --forward need --proxy SOCKET")
	}
	if b.Proxy != "" || len(b.Forwards) > 0 {
		if err := b.Start(); err != nil {
			return &failedError{msg: "sandbox-exec: " + err.Error()}
		}
		defer b.Close()
	}
	code, err := netproxy.Exec(opts.Command)
	if err != nil {
		if errors.Is(err, netproxy.ErrNotFound) {
			return &failedError{msg: "sandbox-exec: " + err.Error(), hint: "is it installed inside the sandbox (sandbox.read)?"}
		}
		return &failedError{msg: "sandbox-exec: " + err.Error()}
	}
	if code != 0 {
		return &silentError{code: code}
	}
	return nil
}
