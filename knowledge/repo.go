package knowledge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// IndexDir is the directory at a repository's root that holds the index.
const IndexDir = ".nerve"

// IndexFile is the index's file name inside IndexDir.
const IndexFile = "knowledge.db"

// IndexPath returns where root's index lives.
func IndexPath(root string) string { return filepath.Join(root, IndexDir, IndexFile) }

// FindRoot returns the repository that contains dir: the nearest directory,
// dir itself or above, holding knowledge.yaml or .git. With explicit set
// (the user named dir with --repo) a directory with neither is its own
// root; otherwise finding none is a RepoError.
func FindRoot(dir string, explicit bool) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		reason := "no such directory"
		if !errors.Is(err, fs.ErrNotExist) {
			reason = err.Error()
		}
		return "", &RepoError{Path: dir, Reason: reason, hint: "pass --repo the path of a repository"}
	}
	if !st.IsDir() {
		return "", &RepoError{Path: dir, Reason: "not a directory", hint: "pass --repo the path of a repository"}
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for d := abs; ; {
		if exists(filepath.Join(d, SpecFile)) || exists(filepath.Join(d, ".git")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if explicit {
		return abs, nil
	}
	return "", &RepoError{
		Path:   abs,
		Reason: "not inside a repository (no knowledge.yaml or .git here or above)",
		hint:   "run in a repository, pass --repo PATH, or -g to search every synced repository",
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
