package main

import (
	"context"
	"errors"
	"time"

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
		return &usageError{msg: e.Error(), hint: e.Hint()}
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
	open := func(name string) (*remote.Client, error) { return remote.ForConfig(cfg, name) }
	var out []listEntry
	for _, l := range remote.ListAll(ctx, sortedNames(cfg.Remotes), remoteListTimeout, open) {
		if l.Unreachable != "" {
			out = append(out, listEntry{Ref: l.Remote + "/", Remote: nullable(l.Remote), Error: nullable(l.Unreachable), hint: hintOf(l.Err)})
			continue
		}
		for _, w := range l.Workflows {
			out = append(out, listEntry{Ref: l.Remote + "/" + w.Name, Name: nullable(w.Name), Remote: nullable(l.Remote), Binding: nullable(w.Binding), Description: nullable(w.Description)})
		}
	}
	return out
}

// remoteListTimeout bounds each remote's answer to a workflow list.
const remoteListTimeout = 5 * time.Second
