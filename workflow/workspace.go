package workflow

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// WorkspaceSpec is a definition's `workspace: {repo, base}`: where a
// thread's git branch lives and the revision it starts from. Empty fields
// take their defaults when a thread starts, not here: for a local thread
// repo is the run's workdir and base is HEAD of that workdir; a cloud
// thread is given both (the CLI resolves base to a commit).
type WorkspaceSpec struct {
	Repo string `yaml:"repo" json:"repo,omitempty"`
	Base string `yaml:"base" json:"base,omitempty"`
}

// Workspace is what a thread records of its workspace: the repository,
// the commit it started from, its branch and the branch's head (the
// commit of the last turn that changed something; Base until then).
type Workspace struct {
	Repo   string `json:"repo"`
	Base   string `json:"base"`
	Branch string `json:"branch"`
	Head   string `json:"head"`
}

// Changes summarise what a turn committed, as `git diff --shortstat`
// counts them.
type Changes struct {
	Files      int `json:"files"`
	Insertions int `json:"insertions"`
	Deletions  int `json:"deletions"`
}

// Message error kinds the workspace layer sets.
const (
	// ErrorKindMerge is a parallel turn whose commits did not merge into
	// the thread branch; the message names the conflicting files.
	ErrorKindMerge = "merge"
	// ErrorKindWorkspace is a turn whose workspace could not be prepared
	// or published (fetch, push, a base the remote lacks, no git).
	ErrorKindWorkspace = "workspace"
)

// BranchNamespace holds every cloud thread's branch: nerve's own, apart
// from the branches of the repository's own.
const BranchNamespace = "nerve/"

// DefaultBranch is the branch a thread works on unless it is given one:
// nerve/WORKFLOW/thread-N.
func DefaultBranch(workflow, thread string) string {
	return BranchNamespace + workflow + "/" + thread
}

// MaxTakenBranches bounds the branches a start request may name as taken.
const MaxTakenBranches = 10000

// FreeBranch is branch, or when taken has it, the first of branch-2,
// branch-3, ... that taken does not: the default branch of a cloud thread
// whose name the shared remote has already (a Khala started afresh on a
// repository another one used). Khala and the CLI both pick it, the CLI
// to say which.
func FreeBranch(branch string, taken []string) string {
	if len(taken) == 0 {
		return branch
	}
	set := make(map[string]bool, len(taken))
	for _, b := range taken {
		set[b] = true
	}
	name := branch
	for n := 2; set[name]; n++ {
		name = branch + "-" + strconv.Itoa(n)
	}
	return name
}

// CheckBranch reports why name is not a branch name git accepts (the
// rules of `git check-ref-format --branch`, without running git), or nil.
func CheckBranch(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case strings.HasPrefix(name, "-"):
		return errors.New("must not start with '-'")
	case name == "HEAD" || name == "@":
		return fmt.Errorf("%q is not a branch name", name)
	case strings.Contains(name, ".."):
		return errors.New("must not contain '..'")
	case strings.Contains(name, "@{"):
		return errors.New("must not contain '@{'")
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return errors.New("must not start or end with '/'")
	case strings.HasSuffix(name, "."):
		return errors.New("must not end with '.'")
	case strings.HasPrefix(name, "refs/"):
		return errors.New("is a ref, not a branch name: drop 'refs/heads/'")
	}
	if err := checkRefChars(name); err != nil {
		return err
	}
	for _, c := range strings.Split(name, "/") {
		switch {
		case c == "":
			return errors.New("must not contain '//'")
		case strings.HasPrefix(c, "."):
			return fmt.Errorf("component %q must not start with '.'", c)
		case strings.HasSuffix(c, ".lock"):
			return fmt.Errorf("component %q must not end with '.lock'", c)
		}
	}
	return nil
}

// checkRefChars refuses what git allows in no ref name: control
// characters, space, ~ ^ : ? * [ and backslash.
func checkRefChars(s string) error {
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			return errors.New("must not contain control characters")
		case r == ' ':
			return errors.New("must not contain spaces")
		case strings.ContainsRune(`~^:?*[\`, r):
			return fmt.Errorf("must not contain %q", r)
		}
	}
	return nil
}

// CheckRevision reports why rev is not a plausible git revision to start
// a thread from (a branch, a tag, a commit, HEAD~2, v1.0^{commit}), or
// nil. It cannot tell whether the repository has it; it refuses what
// would be read as an option, a range or a path.
func CheckRevision(rev string) error {
	switch {
	case rev == "":
		return errors.New("is empty")
	case strings.HasPrefix(rev, "-"):
		return errors.New("must not start with '-'")
	case strings.Contains(rev, ".."):
		return errors.New("is a range; want one revision")
	case strings.ContainsAny(rev, ":\\*?[ \t\n"):
		return errors.New("must not contain spaces, ':', '\\', '*', '?' or '['")
	}
	for _, r := range rev {
		if r < 0x20 || r == 0x7f {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

// IsCommitID reports whether s is a full commit id: 40 hex digits (SHA-1)
// or 64 (SHA-256 repositories), lowercase as git prints them.
func IsCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckSharedRepo reports why repo cannot be the repository of a cloud
// thread, which every serving agent must fetch from and push to: a git
// URL (https, http, ssh, git, file, or scp-like user@host:path) or an
// absolute path (a shared disk), with no password in it (it would be
// stored and shown with every thread). nil when it is one.
func CheckSharedRepo(repo string) error {
	switch {
	case strings.TrimSpace(repo) == "":
		return errors.New("is empty")
	case strings.HasPrefix(repo, "-"):
		return errors.New("must not start with '-'")
	case strings.ContainsAny(repo, "\n\r\t") || strings.ContainsFunc(repo, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errors.New("must not contain control characters")
	}
	if i := strings.Index(repo, "://"); i > 0 {
		u, err := url.Parse(repo)
		if err != nil {
			return fmt.Errorf("not a URL: %v", errors.Unwrap(err))
		}
		switch u.Scheme {
		case "https", "http", "ssh", "git", "git+ssh", "ssh+git":
			if u.Host == "" {
				return fmt.Errorf("%s URL has no host", u.Scheme)
			}
		case "file":
			if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
				return errors.New("file URL needs an absolute path")
			}
		default:
			return fmt.Errorf("unsupported scheme %q (want https, ssh, git or file)", u.Scheme)
		}
		if _, has := u.User.Password(); has {
			return errors.New("must not carry a password: use the machine's git credentials (a credential helper or ssh key)")
		}
		return nil
	}
	if filepath.IsAbs(repo) {
		return nil
	}
	// scp-like: [user@]host:path, as git reads it (no slash before the colon).
	if i := strings.IndexByte(repo, ':'); i > 0 && !strings.Contains(repo[:i], "/") && i < len(repo)-1 {
		return nil
	}
	return errors.New("a cloud workflow's repo must be reachable by every serving agent: a git URL (https://, ssh://, git@host:path) or an absolute path")
}
