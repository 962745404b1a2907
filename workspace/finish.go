package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Changes sums a diff: what a message's `changes` carries.
type Changes struct {
	Files      int `json:"files"`
	Insertions int `json:"insertions"`
	Deletions  int `json:"deletions"`
}

// Result is what a finished turn left.
type Result struct {
	Commit  string  // the turn's last commit (Start when it changed nothing)
	Changes Changes // the turn's change: Start..Commit (Manager.Changes sums the thread's)
	Ref     string  // a parallel turn's commit is kept under this ref for Merge
}

// Subject is the subject of a commit made on an agent's behalf:
// "ROLE, step N: " and the first line of its answer.
func Subject(role string, step int, answer string) string {
	s := fmt.Sprintf("%s, step %d", role, step)
	line, _, _ := strings.Cut(strings.TrimSpace(answer), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return s
	}
	if len(line) > 200 {
		line = line[:200]
		for !utf8.ValidString(line) {
			line = line[:len(line)-1]
		}
	}
	return s + ": " + line
}

// Finish ends the turn: it commits what the agent changed and did not
// commit (author and committer: the agent, message: subject), keeps the
// agent's own commits as they are, counts the changes and publishes the
// turn's last commit: the thread branch moves to it (a local thread), or
// is pushed with a lease on Start (a cloud thread); a parallel turn's
// commit is kept under Result.Ref for Merge instead. An agent that removed
// the worktree's .git file is repaired; one that left the worktree on a
// commit that does not descend from Start fails with ErrWorktree, and the
// branch stays where it was.
func (tr *Tree) Finish(ctx context.Context, author, subject string) (Result, error) {
	m := tr.m
	if err := tr.repair(); err != nil {
		return Result{}, err
	}
	h, err := tr.where(ctx)
	if err != nil {
		return Result{}, err
	}
	head := h.oid
	if head != tr.Start {
		if _, err := m.run(ctx, tr.Dir, nil, "merge-base", "--is-ancestor", "--end-of-options", tr.Start, head); err != nil {
			where := "commit " + short(head)
			if h.branch != "" {
				where = "branch " + strconv.Quote(h.branch)
			}
			return Result{}, wsErr(ErrWorktree, fmt.Sprintf("the agent left worktree %s on %s, which does not descend from the turn's start %s; the branch stays at %s",
				tr.Dir, where, short(tr.Start), short(tr.Start)))
		}
	}
	if h.branch != "" {
		// The agent checked out (or made) a branch; its work descends from
		// Start, so it is kept and the worktree detached again.
		if _, err := m.run(ctx, tr.Dir, nil, "checkout", "--quiet", "--detach"); err != nil {
			return Result{}, fail("detach the worktree", err)
		}
	}
	var res Result
	var summary *Changes
	if res.Commit, summary, err = tr.commit(ctx, author, subject, head); err != nil {
		return Result{}, err
	}
	if summary != nil && head == tr.Start {
		res.Changes = *summary // the turn is the one commit git just summed up
	} else if res.Changes, err = m.changes(ctx, tr.Dir, tr.Start, res.Commit); err != nil {
		return res, err
	}
	if err := tr.publish(ctx, &res); err != nil {
		return res, err
	}
	return res, nil
}

// commit commits everything in the worktree on the agent's behalf, if
// anything is left uncommitted, and returns the worktree's commit and, when
// it committed, the commit's change as git summed it up.
func (tr *Tree) commit(ctx context.Context, author, subject, head string) (string, *Changes, error) {
	m := tr.m
	if strings.TrimSpace(subject) == "" {
		subject = "nerve: turn" // git refuses an empty message
	}
	if _, err := m.run(ctx, tr.Dir, nil, "add", "--all"); err != nil {
		return "", nil, fail("stage the agent's changes", err)
	}
	out, err := m.run(ctx, tr.Dir, identity(author), "commit", "--no-verify", "--cleanup=verbatim", "--no-status", "-m", subject)
	if err != nil {
		// Exit 1 with nothing staged is "nothing to commit": the agent
		// committed all it did, or did nothing.
		var ge *gitError
		if errors.As(err, &ge) && exitCode(ge.err) == 1 {
			if _, derr := m.run(ctx, tr.Dir, nil, "diff", "--cached", "--quiet", "--no-ext-diff", "HEAD", "--"); derr == nil {
				return head, nil, nil
			}
		}
		return "", nil, fail("commit the agent's changes", err)
	}
	next, err := tr.head(ctx)
	if err != nil {
		return "", nil, err
	}
	if c, ok := parseShortstat(out); ok {
		return next, &c, nil
	}
	return next, nil, nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// head is the worktree's commit: read from its detached HEAD file when it
// can be, from git when not.
func (tr *Tree) head(ctx context.Context) (string, error) {
	if b, err := os.ReadFile(filepath.Join(tr.meta.Admin, "HEAD")); err == nil {
		if h := strings.TrimSpace(string(b)); len(h) >= 40 && !strings.HasPrefix(h, "ref:") {
			return h, nil
		}
	}
	out, err := tr.m.run(ctx, tr.Dir, nil, "rev-parse", "HEAD")
	if err != nil {
		return "", fail("read the turn's commit", err)
	}
	return strings.TrimSpace(out), nil
}

// identity is the environment naming author as author and committer.
func identity(author string) []string {
	if author = strings.TrimSpace(author); author == "" {
		author = "nerve"
	}
	email := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '-'
	}, author) + "@nerve.invalid"
	return []string{"GIT_AUTHOR_NAME=" + author, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + author, "GIT_COMMITTER_EMAIL=" + email}
}

// publish moves the branch (or keeps a parallel turn's commit) and records
// the worktree as idle at res.Commit. The state is "publishing" while the
// branch moves, so a crash in between can be undone by the next Open.
func (tr *Tree) publish(ctx context.Context, res *Result) error {
	m, t := tr.m, tr.turn
	if t.Parallel {
		res.Ref = TurnRef(t.Branch, t.Step, res.Commit)
		if err := m.pushRef(ctx, tr.src, res.Ref, res.Commit); err != nil {
			return err
		}
	} else if res.Commit != tr.Start || (t.Head == "" && !t.Cloud) {
		if err := tr.save(statePublishing, res.Commit); err != nil {
			return err
		}
		if err := m.moveBranch(ctx, tr.src, t.Branch, res.Commit, t.Workspace.lease(), tr.drop...); err != nil {
			return err
		}
		tr.dropped = tr.src.cloud && len(tr.drop) > 0
	}
	tr.meta.Head = res.Commit
	return tr.save(stateIdle, "")
}

// TurnRef is where a parallel turn's commit waits for Merge: outside
// refs/heads, named by its commit so publishing it never overwrites.
func TurnRef(branch string, step int, commit string) string {
	return fmt.Sprintf("refs/nerve/turns/%s/step-%d-%s", branch, step, short(commit))
}

var shortstat = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^ ?(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?$`)
})

// parseShortstat reads git's "N files changed, I insertions(+), D
// deletions(-)" line.
func parseShortstat(out string) (Changes, bool) {
	g := shortstat().FindStringSubmatch(out)
	if g == nil {
		return Changes{}, false
	}
	var c Changes
	c.Files, _ = strconv.Atoi(g[1])
	c.Insertions, _ = strconv.Atoi(g[2])
	c.Deletions, _ = strconv.Atoi(g[3])
	return c, true
}

// changes counts the diff from..to, renames found as `git commit` finds
// them.
func (m *Manager) changes(ctx context.Context, dir, from, to string) (Changes, error) {
	if from == to {
		return Changes{}, nil
	}
	out, err := m.run(ctx, dir, nil, "diff", "--shortstat", "--find-renames", "--end-of-options", from, to, "--")
	if err != nil {
		return Changes{}, fail("count the changes", err)
	}
	c, _ := parseShortstat(out)
	return c, nil
}
