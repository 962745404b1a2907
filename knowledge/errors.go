package knowledge

import (
	"errors"
	"fmt"
)

// Exit codes, as cmd/nerve maps them: 1 the work failed, 2 usage or
// configuration.
const (
	exitFailed = 1
	exitUsage  = 2
)

// ErrNoIndex is matched (errors.Is) by a NoIndexError.
var ErrNoIndex = errors.New("no knowledge index")

// NoIndexError says a repository (or, with Repo empty, every remembered
// repository) has no index yet.
type NoIndexError struct {
	Repo string
}

func (e *NoIndexError) Error() string {
	if e.Repo == "" {
		return "no repository has a knowledge index yet"
	}
	return fmt.Sprintf("%s has no knowledge index yet", e.Repo)
}

// ExitCode is 1: nothing to search is a failed query, not a usage error.
func (e *NoIndexError) ExitCode() int { return exitFailed }

// Hint says how to build one.
func (e *NoIndexError) Hint() string {
	if e.Repo == "" {
		return "run `nerve knowledge sync` in a repository first"
	}
	return fmt.Sprintf("run `nerve knowledge sync --repo %s`", e.Repo)
}

// Is makes errors.Is(err, ErrNoIndex) true.
func (e *NoIndexError) Is(target error) bool { return target == ErrNoIndex }

// RepoError is a repository path that does not exist or is not a directory,
// or a working directory that is inside no repository: exit 2.
type RepoError struct {
	Path   string
	Reason string
	hint   string
}

func (e *RepoError) Error() string { return fmt.Sprintf("repository %s: %s", e.Path, e.Reason) }

// ExitCode is 2: the user named the wrong place.
func (e *RepoError) ExitCode() int { return exitUsage }

// Hint says what to pass instead.
func (e *RepoError) Hint() string { return e.hint }

// SpecError is a bad knowledge.yaml: it names the file, the line and the
// field.
type SpecError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *SpecError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
}

// ExitCode is 2: a configuration error.
func (e *SpecError) ExitCode() int { return exitUsage }

// Hint points at the format.
func (e *SpecError) Hint() string {
	return "knowledge.yaml takes include and exclude (lists of globs, ** for any directories) and max_file_size; see `nerve knowledge --help`"
}

// EmbedError is an embeddings endpoint that is down, refuses or answers
// nonsense. The lexical index it leaves behind is complete and usable.
type EmbedError struct {
	URL   string
	Model string
	Err   error
}

func (e *EmbedError) Error() string {
	return fmt.Sprintf("embeddings %s (model %s): %v", e.URL, e.Model, e.Err)
}

func (e *EmbedError) Unwrap() error { return e.Err }

// ExitCode is 1: the remote side failed.
func (e *EmbedError) ExitCode() int { return exitFailed }

// Hint says the lexical index is still there.
func (e *EmbedError) Hint() string {
	return "the lexical index was updated and queries still work; check knowledge.base_url in nerve.yaml, or remove the knowledge section to index without embeddings"
}

// BusyError is a second sync started while one is running on the same
// repository.
type BusyError struct{ Repo string }

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s: another knowledge sync is running", e.Repo)
}

// ExitCode is 1.
func (e *BusyError) ExitCode() int { return exitFailed }

// Hint says to wait.
func (e *BusyError) Hint() string { return "wait for it to finish; queries work meanwhile" }
