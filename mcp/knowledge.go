package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/knowledge"
)

// KnowledgeQueryInput is knowledge_query's arguments: those of `nerve
// knowledge query`.
type KnowledgeQueryInput struct {
	Query  string `json:"query" jsonschema:"what to look for, in words or identifiers (e.g. how are leases renewed)"`
	Repo   string `json:"repo,omitempty" jsonschema:"search the repository at this path; default: the one containing your working directory"`
	Global bool   `json:"global,omitempty" jsonschema:"search every synced repository instead"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many hits (default 10)"`
}

// KnowledgeQueryOutput is the ranked chunks, best first.
type KnowledgeQueryOutput struct {
	Hits     []knowledge.Hit `json:"hits"`
	Warnings []string        `json:"warnings,omitempty"`
}

func (s *server) addKnowledgeTools(srv *sdk.Server) {
	addTool(srv, &sdk.Tool{
		Name:  "knowledge_query",
		Title: "Search the repository's knowledge index",
		Description: `Rank chunks of the repository (code and docs, indexed by 'nerve knowledge sync') against a question, best first:
each hit has its path, start and end line, score and text. Use it to find where something is done before
reading files.`,
		InputSchema: schemaFor[KnowledgeQueryInput](func(p map[string]*jsonschema.Schema) {
			p["query"].MinLength = ptr(1)
			p["limit"].Minimum = ptr(0.0)
			p["limit"].Maximum = ptr(100.0)
		}),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.knowledgeQuery)
}

func (s *server) knowledgeQuery(ctx context.Context, in KnowledgeQueryInput) (KnowledgeQueryOutput, error) {
	out := KnowledgeQueryOutput{Hits: []knowledge.Hit{}}
	if strings.TrimSpace(in.Query) == "" {
		return out, usagef("the query is empty: ask in words or identifiers, e.g. how are leases renewed")
	}
	if in.Repo != "" && in.Global {
		return out, usagef("repo and global cannot be used together: name one repository or search all")
	}
	var roots []string
	if in.Global {
		repos, err := (&knowledge.Registry{Home: config.Home(s.opts.Getenv)}).List()
		if err != nil {
			return out, err
		}
		if len(repos) == 0 {
			return out, &knowledge.NoIndexError{}
		}
		for _, r := range repos {
			roots = append(roots, r.Path)
		}
	} else {
		var (
			root string
			err  error
		)
		if in.Repo != "" {
			root, err = knowledge.FindRoot(in.Repo, true)
		} else {
			root, err = knowledge.FindRoot(s.workdir(), false)
		}
		if err != nil {
			return out, repoError(err)
		}
		roots = []string{root}
	}
	emb, err := s.embedder()
	if err != nil {
		return out, err
	}
	hits, err := s.indexes.Query(ctx, roots, knowledge.QueryOptions{
		Text: in.Query, Limit: in.Limit, Embedder: emb,
		Warn: func(msg string) { out.Warnings = append(out.Warnings, msg) },
	})
	if err != nil {
		return out, err
	}
	if hits != nil {
		out.Hits = hits
	}
	return out, nil
}

// embedder is the embeddings client nerve.yaml configures, or nil (lexical
// ranking only).
func (s *server) embedder() (*knowledge.Embedder, error) {
	if s.opts.Config == nil {
		return nil, nil
	}
	cfg, err := s.opts.Config()
	if err != nil {
		return nil, fmt.Errorf("nerve.yaml: %w", err)
	}
	k := cfg.Knowledge
	if k == nil || k.BaseURL == "" || k.Model == "" {
		return nil, nil
	}
	e := &knowledge.Embedder{BaseURL: k.BaseURL, Model: k.Model, Timeout: k.Timeout.D()}
	if k.APIKeyEnv != "" {
		e.APIKey = s.opts.Getenv(k.APIKeyEnv)
	}
	return e, nil
}

// repoError says what to do about a repository that cannot be searched in
// the tool's own terms (the CLI's hint names its flags).
func repoError(err error) error {
	var re *knowledge.RepoError
	if errors.As(err, &re) {
		return fmt.Errorf("%s: pass repo with a repository's path, or global: true to search every synced one", re.Error())
	}
	return err
}
