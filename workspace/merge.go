package workspace

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Parallel is a parallel turn's outcome, as Merge takes it: its step and
// Result.Commit.
type Parallel struct {
	Step   int
	Commit string
}

// Merged is the thread branch after Merge.
type Merged struct {
	Commit  string  // the branch's head: the last clean merge
	Steps   []int   // the steps merged, in order
	Changes Changes // what the merges changed: t.Head..Commit
}

// Merge merges parallel turns' commits into the thread branch in step
// order, in the thread's worktree (t: the thread's Key and Workspace, with
// Head the commit the parallel turns started from), as author. It stops at
// the first conflict: the branch moves to the last clean merge and the
// error is an *Error of KindMerge naming the step and the conflicting
// files. The merged turns' worktrees are removed; an unmerged turn's
// commit stays under its TurnRef.
func (m *Manager) Merge(ctx context.Context, t Turn, author string, turns []Parallel) (Merged, error) {
	t.Parallel = false
	tr, err := m.Open(ctx, t)
	if err != nil {
		return Merged{}, err
	}
	turns = slices.Clone(turns)
	slices.SortFunc(turns, func(a, b Parallel) int { return a.Step - b.Step })
	head := tr.Start
	var res Merged
	var conflict error
	for _, p := range turns {
		if err := m.ensure(ctx, tr.src, p.Commit, fmt.Sprintf("step %d's commit", p.Step)); err != nil {
			return res, err
		}
		next, err := tr.mergeOne(ctx, author, p)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Kind == KindMerge {
				e.Msg += fmt.Sprintf("; the branch stays at %s", short(head))
				conflict = e
				break
			}
			return res, err
		}
		head = next
		res.Steps = append(res.Steps, p.Step)
	}
	r := Result{Commit: head}
	for _, p := range turns {
		if slices.Contains(res.Steps, p.Step) {
			tr.drop = append(tr.drop, TurnRef(t.Branch, p.Step, p.Commit))
		}
	}
	if err := tr.publish(ctx, &r); err != nil {
		return res, err
	}
	res.Commit = head
	if res.Changes, err = m.changes(ctx, tr.Dir, tr.Start, head); err != nil {
		return res, err
	}
	m.dropTurns(ctx, tr.src, t, turns, res.Steps, tr.dropped)
	return res, conflict
}

// mergeOne merges one turn's commit into the worktree's HEAD.
func (tr *Tree) mergeOne(ctx context.Context, author string, p Parallel) (string, error) {
	m := tr.m
	_, err := m.run(ctx, tr.Dir, identity(author), "-c", "rerere.enabled=false", "merge",
		"--quiet", "--ff", "--no-edit", "--no-verify", "--no-autostash",
		"-m", fmt.Sprintf("merge step %d into %s", p.Step, tr.turn.Branch), "--end-of-options", p.Commit)
	if err != nil {
		out, _ := m.run(ctx, tr.Dir, nil, "diff", "--name-only", "--diff-filter=U", "-z")
		files := strings.FieldsFunc(out, func(r rune) bool { return r == 0 })
		_, _ = m.run(ctx, tr.Dir, nil, "merge", "--abort")
		if len(files) == 0 {
			_, _ = m.run(ctx, tr.Dir, nil, "reset", "--quiet", "--hard")
			return "", fail(fmt.Sprintf("merge step %d", p.Step), err)
		}
		return "", &Error{Kind: KindMerge, Step: p.Step, Files: files, Err: ErrConflict,
			Msg: fmt.Sprintf("merge conflict in %s: step %d conflicts with the steps merged before it",
				strings.Join(files, ", "), p.Step)}
	}
	out, err := m.run(ctx, tr.Dir, nil, "rev-parse", "HEAD")
	if err != nil {
		return "", fail("read the merge", err)
	}
	return strings.TrimSpace(out), nil
}

// dropTurns removes the merged turns' worktrees and refs; what was not
// merged stays for a person to look at.
// A cloud publish that moved the branch deleted the refs already (pushed).
func (m *Manager) dropTurns(ctx context.Context, src source, t Turn, turns []Parallel, merged []int, pushed bool) {
	var refs []string
	for _, p := range turns {
		if !slices.Contains(merged, p.Step) {
			continue
		}
		pt := t
		pt.Parallel, pt.Step = true, p.Step
		name := pt.name()
		dir := filepath.Join(m.worktreesDir(), name)
		md, _ := readMeta(dir + ".json")
		m.removeTree(ctx, dir, md)
		refs = append(refs, TurnRef(t.Branch, p.Step, p.Commit))
	}
	if len(refs) == 0 || pushed {
		return
	}
	if !src.cloud {
		for _, r := range refs {
			_, _ = m.run(ctx, src.dir, nil, "update-ref", "-d", r)
		}
		return
	}
	args := []string{"-c", "remote.origin.mirror=false", "push", "--quiet", "--no-verify", "origin"}
	for _, r := range refs {
		args = append(args, ":"+r)
	}
	_, _ = m.run(ctx, src.dir, nil, args...)
}
