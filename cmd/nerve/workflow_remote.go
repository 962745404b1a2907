package main

import (
	"context"
	"errors"
	"strings"

	"github.com/nerve-agents/nerve/remote"
)

// remoteClient returns the client of a ref's remote. Inside a turn of a
// remote thread this is how `nerve thread messages` would reach it, so the
// daemon's token file is used.
func remoteClient(f *Factory, name string) (*remote.Client, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	return remote.ForConfig(cfg, name)
}

// remoteUsage makes the server's refusal of a request (unknown workflow,
// bad input) a usage error, as the same mistake is locally.
func remoteUsage(err error) error {
	var e *remote.Error
	if errors.As(err, &e) && (e.Status == 400 || e.Status == 404) {
		return &usageError{msg: e.Error()}
	}
	return err
}

// remoteEntries lists each remote's workflows as REMOTE/NAME; a remote that
// cannot be read is one entry saying so, not an empty list.
func remoteEntries(ctx context.Context, f *Factory) []listEntry {
	cfg, err := f.Config()
	if err != nil {
		return nil
	}
	var out []listEntry
	for _, name := range sortedNames(cfg.Remotes) {
		c, err := remote.ForConfig(cfg, name)
		var wfs []remote.Workflow
		if err == nil {
			c.Retries = 0
			wfs, err = c.Workflows(ctx)
		}
		if err != nil {
			msg := err.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "remote ") {
				msg = msg[i+2:]
			}
			out = append(out, listEntry{Ref: name + "/", Remote: nullable(name), Error: nullable("unreachable: " + msg)})
			continue
		}
		for _, w := range wfs {
			out = append(out, listEntry{Ref: name + "/" + w.Name, Name: nullable(w.Name), Remote: nullable(name), Binding: nullable(w.Binding), Description: nullable(w.Description)})
		}
	}
	return out
}
