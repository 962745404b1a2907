package khala

import (
	"path"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Claim bounds: a claim takes at most maxClaim turns and names at most
// maxFilter workflows, roles or repository globs, each glob at most
// maxRepoGlob bytes (longer than any URL a workspace may name).
const (
	maxClaim    = 100
	maxFilter   = 100
	maxRepoGlob = 2048
)

// claimRepos checks a claim's repository filter: at most maxFilter globs,
// each a valid path.Match pattern of bounded length.
func claimRepos(f *api.RepoFilter) (*khaladb.RepoFilter, error) {
	if f == nil {
		return nil, nil
	}
	if len(f.Globs) > maxFilter {
		return nil, badRequest("repos: name at most %d globs", maxFilter)
	}
	for _, g := range f.Globs {
		if g == "" || len(g) > maxRepoGlob {
			return nil, badRequest("repos: a glob must have 1 to %d bytes", maxRepoGlob)
		}
		if _, err := path.Match(g, ""); err != nil {
			return nil, badRequest("repos: glob %q: %v", g, err)
		}
	}
	return &khaladb.RepoFilter{Globs: f.Globs}, nil
}
