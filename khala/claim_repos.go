package khala

import (
	"path"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

// maxRepoGlob bounds one repository glob of a claim: longer than any URL a
// workspace may name.
const maxRepoGlob = 2048

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
