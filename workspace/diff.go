package workspace

import (
	"context"
	"io"
)

// Diff writes the thread's change against its base to w: a stat, then
// the patch (without it when statOnly). It reads a cloud thread's head
// from this machine's mirror, fetching it if missing.
func (m *Manager) Diff(ctx context.Context, ws Workspace, w io.Writer, statOnly bool) error {
	src, err := m.threadSource(ctx, ws)
	if err != nil {
		return err
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--stat"}
	if !statOnly {
		args = append(args, "--patch")
	}
	if err := m.runTo(ctx, src.dir, nil, w, append(args, "--end-of-options", ws.Base, ws.Head, "--")...); err != nil {
		return fail("diff the thread", err)
	}
	return nil
}

// Changes sums the thread's change against its base.
func (m *Manager) Changes(ctx context.Context, ws Workspace) (Changes, error) {
	src, err := m.threadSource(ctx, ws)
	if err != nil {
		return Changes{}, err
	}
	return m.changes(ctx, src.dir, ws.Base, ws.Head)
}

// threadSource is ws's repository, holding its base and head.
func (m *Manager) threadSource(ctx context.Context, ws Workspace) (source, error) {
	src, err := m.source(ctx, ws)
	if err != nil {
		return src, err
	}
	if err := m.ensure(ctx, src, ws.Head, "the thread's head"); err != nil {
		return src, err
	}
	return src, m.ensure(ctx, src, ws.Base, "the thread's base")
}
