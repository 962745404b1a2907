package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/knowledge"
)

// KnowledgeSyncOptions are the inputs of `nerve knowledge sync`.
type KnowledgeSyncOptions struct {
	IO     *IOStreams
	Config func() (*config.Config, error)
	Getenv func(string) string
	Getwd  func() (string, error)

	Repo string
	JSON bool

	ctx context.Context
}

func newCmdKnowledgeSync(f *Factory, runF func(*KnowledgeSyncOptions) error) *cobra.Command {
	opts := &KnowledgeSyncOptions{IO: f.IO, Config: f.Config, Getenv: f.Getenv, Getwd: os.Getwd}
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Index the repository's changed files",
		Long: `Index the files knowledge.yaml selects in the repository that contains the working
directory (or --repo): new and changed files are chunked and indexed, deleted and newly excluded
ones removed; unchanged files cost a stat. With an embeddings endpoint configured, chunks without
a vector of its model are embedded. Safe to interrupt: the next sync completes the work.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("pass the repository with --repo PATH", "knowledge sync takes no arguments, got %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return knowledgeSyncRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Repo, "repo", "", "the repository to index (default: the one containing the working directory)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the summary as JSON")
	return cmd
}

func knowledgeSyncRun(opts *KnowledgeSyncOptions) error {
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	root, err := knowledgeRoot(opts.Repo, opts.Getwd)
	if err != nil {
		return err
	}
	emb, err := knowledgeEmbedder(opts.Config, opts.Getenv)
	if err != nil {
		return err
	}
	so := knowledge.SyncOptions{
		Root:     root,
		Embedder: emb,
		Registry: &knowledge.Registry{Home: config.Home(opts.Getenv)},
	}
	tty := opts.IO.IsTTY() && !opts.JSON
	if tty {
		so.Progress = func(p knowledge.Progress) { drawSyncProgress(opts.IO, p) }
	}
	res, err := knowledge.Sync(ctx, so)
	if tty {
		fmt.Fprint(opts.IO.ErrOut, "\r\033[K")
	}
	if res != nil {
		printSyncResult(opts.IO, res, opts.JSON)
	}
	return err
}

func drawSyncProgress(io *IOStreams, p knowledge.Progress) {
	secs := p.Elapsed.Round(100 * time.Millisecond).Seconds()
	if p.Phase == "embed" {
		fmt.Fprintf(io.ErrOut, "\r\033[Kembedding %d/%d chunks  %.1fs", p.Embedded, p.ToEmbed, secs)
		return
	}
	fmt.Fprintf(io.ErrOut, "\r\033[Kindexing %d/%d files  %d chunks  %.1fs", p.Done, p.Files, p.Chunks, secs)
}

func printSyncResult(io *IOStreams, r *knowledge.SyncResult, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(io.Out).Encode(r)
		return
	}
	skipped := ""
	if r.Skipped > 0 {
		skipped = fmt.Sprintf(", %d skipped", r.Skipped)
	}
	fmt.Fprintf(io.Out, "synced %s: %d added, %d updated, %d removed, %d unchanged%s (%d chunks, %.2fs)\n",
		r.Repo, r.Added, r.Updated, r.Removed, r.Unchanged, skipped, r.Chunks, r.Seconds)
	if r.Model != "" {
		fmt.Fprintf(io.Out, "embedded %d chunks with %s (%d cached)\n", r.Embedded, r.Model, r.EmbedCached)
	}
}

// knowledgeRoot is the repository --repo names, or the one containing the
// working directory.
func knowledgeRoot(repo string, getwd func() (string, error)) (string, error) {
	if repo != "" {
		return knowledge.FindRoot(repo, true)
	}
	if getwd == nil {
		getwd = os.Getwd
	}
	wd, err := getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return knowledge.FindRoot(wd, false)
}
