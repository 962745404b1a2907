package knowledge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nerve-agents/nerve/internal/atomicfile"
)

// RegistryFile is the file in NERVE_HOME that remembers synced repositories.
const RegistryFile = "knowledge-repos.json"

// Registry is the set of repositories synced from this NERVE_HOME, so a
// global query can find them.
type Registry struct {
	Home string
}

// RepoEntry is one remembered repository.
type RepoEntry struct {
	Path     string    `json:"path"`
	SyncedAt time.Time `json:"synced_at"`
}

type registryDoc struct {
	Repos []RepoEntry `json:"repos"`
}

func (r Registry) file() string { return filepath.Join(r.Home, RegistryFile) }

// List returns the remembered repositories, sorted by path.
func (r Registry) List() ([]RepoEntry, error) {
	data, err := os.ReadFile(r.file())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.file(), err)
	}
	var doc registryDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read %s: %w", r.file(), err)
	}
	sort.Slice(doc.Repos, func(i, j int) bool { return doc.Repos[i].Path < doc.Repos[j].Path })
	return doc.Repos, nil
}

// Remember records root as synced now. Concurrent syncs of different
// repositories serialise on a lock file, so neither entry is lost.
func (r Registry) Remember(root string, at time.Time) error {
	if err := os.MkdirAll(r.Home, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", r.Home, err)
	}
	return atomicfile.WithLock(r.file(), func() error { return r.remember(root, at) })
}

// remember is Remember under the registry's lock.
func (r Registry) remember(root string, at time.Time) error {
	repos, err := r.List()
	if err != nil {
		repos = nil // a corrupt file is rebuilt from what syncs say next
	}
	found := false
	for i := range repos {
		if repos[i].Path == root {
			repos[i].SyncedAt, found = at.UTC(), true
		}
	}
	if !found {
		repos = append(repos, RepoEntry{Path: root, SyncedAt: at.UTC()})
	}
	data, err := json.MarshalIndent(registryDoc{Repos: repos}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(r.file(), append(data, '\n'), 0o600)
}
