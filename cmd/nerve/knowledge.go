package main

import (
	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/knowledge"
)

func newCmdKnowledge(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "knowledge",
		Short: "Index a repository and ask it questions",
		Long: `A repository's knowledge index: what agents query instead of being handed the whole repository.

knowledge.yaml at the repository's root (committed) selects the files:

  include: ["src/**/*.ts", "docs/**/*.md", "*.md"]   # default: common source, docs and build files
  exclude: ["node_modules/", "dist/**", "*.test.ts"] # default: dependency, build and cache dirs, lock files
  max_file_size: 1MiB                                # larger files are skipped (default 1MiB)

A glob with no slash matches at any depth, as in .gitignore; "dir/" is everything under dir;
** is any number of directories. .git, binary files and oversized files are always skipped.

The index is .nerve/knowledge.db beside knowledge.yaml: a cache, gitignored, rebuilt by sync.
Ranking is BM25 over code-aware tokens (SignalBus is found by "signal bus"); with
knowledge: {base_url, model, api_key_env} in nerve.yaml (an OpenAI-compatible /v1/embeddings,
e.g. a local Ollama at http://127.0.0.1:11434/v1), sync also stores vectors and query fuses
both rankings.`,
	}
	cmd.AddCommand(
		newCmdKnowledgeSync(f, nil),
		newCmdKnowledgeQuery(f, nil),
	)
	return cmd
}

// knowledgeEmbedder returns the embeddings client nerve.yaml configures,
// or nil when it configures none (lexical ranking only).
func knowledgeEmbedder(cfgFn func() (*config.Config, error), getenv func(string) string) (*knowledge.Embedder, error) {
	if cfgFn == nil {
		return nil, nil
	}
	cfg, err := cfgFn()
	if err != nil {
		return nil, err
	}
	if cfg == nil || cfg.Knowledge == nil || cfg.Knowledge.BaseURL == "" || cfg.Knowledge.Model == "" {
		return nil, nil
	}
	e := &knowledge.Embedder{BaseURL: cfg.Knowledge.BaseURL, Model: cfg.Knowledge.Model, Timeout: cfg.Knowledge.Timeout.D()}
	if cfg.Knowledge.APIKeyEnv != "" && getenv != nil {
		e.APIKey = getenv(cfg.Knowledge.APIKeyEnv)
	}
	return e, nil
}
