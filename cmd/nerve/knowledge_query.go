package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/knowledge"
)

// KnowledgeQueryOptions are the inputs of `nerve knowledge query`.
type KnowledgeQueryOptions struct {
	IO     *IOStreams
	Config func() (*config.Config, error)
	Getenv func(string) string
	Getwd  func() (string, error)

	Text   string
	Repo   string
	Global bool
	Limit  int
	JSON   bool

	ctx context.Context
}

// On a TTY a hit's text is cut to this many lines of this many columns.
const (
	ttyHitLines = 8
	ttyHitCols  = 120
)

func newCmdKnowledgeQuery(f *Factory, runF func(*KnowledgeQueryOptions) error) *cobra.Command {
	opts := &KnowledgeQueryOptions{IO: f.IO, Config: f.Config, Getenv: f.Getenv, Getwd: os.Getwd}
	cmd := &cobra.Command{
		Use:   "query TEXT",
		Short: "Ask the repository's knowledge index",
		Long: `Rank the chunks of the repository that contains the working directory (or --repo, or with -g
every synced repository) against TEXT. Each hit is path:start-end, its score and the chunk (cut short
on a terminal). --json prints one object per line: {"repo","path","start_line","end_line","score","text"}.`,
		Example: `  nerve knowledge query "how does the signal bus work"
  nerve knowledge query -g --limit 5 "lease renewal"
  nerve knowledge query --json "retry with backoff" | jq -r .path`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("pass the question as one argument: nerve knowledge query \"how are leases renewed\"", "knowledge query needs TEXT")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ctx = cmd.Context()
			opts.Text = strings.Join(args, " ")
			if opts.Repo != "" && opts.Global {
				return usageErrorf("use --repo P for one repository or -g for all, not both", "--repo and -g cannot be used together")
			}
			if opts.Limit < 1 {
				return usageErrorf("pass --limit 1 or more", "--limit must be at least 1, not %d", opts.Limit)
			}
			if strings.TrimSpace(opts.Text) == "" {
				return usageErrorf(`ask in words or identifiers, e.g. nerve knowledge query "how are leases renewed"`, "the query is empty")
			}
			if runF != nil {
				return runF(opts)
			}
			return knowledgeQueryRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Repo, "repo", "", "search this repository (default: the one containing the working directory)")
	cmd.Flags().BoolVarP(&opts.Global, "global", "g", false, "search every synced repository")
	cmd.Flags().IntVar(&opts.Limit, "limit", 10, "how many hits to show")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object per hit and line")
	return cmd
}

func knowledgeQueryRun(opts *KnowledgeQueryOptions) error {
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var roots []string
	if opts.Global {
		repos, err := (&knowledge.Registry{Home: config.Home(opts.Getenv)}).List()
		if err != nil {
			return err
		}
		if len(repos) == 0 {
			return &knowledge.NoIndexError{}
		}
		for _, r := range repos {
			roots = append(roots, r.Path)
		}
	} else {
		root, err := knowledgeRoot(opts.Repo, opts.Getwd)
		if err != nil {
			return err
		}
		roots = []string{root}
	}
	emb, err := knowledgeEmbedder(opts.Config, opts.Getenv)
	if err != nil {
		return err
	}
	warn := func(msg string) { fmt.Fprintf(opts.IO.ErrOut, "warning: %s\n", msg) }
	hits, ok := knowledgeQueryDaemon(ctx, opts, roots, emb, warn)
	if !ok {
		hits, err = knowledge.Query(ctx, roots, knowledge.QueryOptions{
			Text:     opts.Text,
			Limit:    opts.Limit,
			Embedder: emb,
			Warn:     warn,
			Once:     true, // this process asks once and exits
		})
		if err != nil {
			return err
		}
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		for _, h := range hits {
			if err := enc.Encode(h); err != nil {
				return err
			}
		}
		return nil
	}
	if len(hits) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "no matches for %q\n", opts.Text)
		return nil
	}
	for i, h := range hits {
		if i > 0 {
			fmt.Fprintln(opts.IO.Out)
		}
		name := h.Path
		if opts.Global {
			name = filepath.Join(h.Repo, filepath.FromSlash(h.Path))
		}
		fmt.Fprintf(opts.IO.Out, "%s:%d-%d  score %.3f\n", name, h.StartLine, h.EndLine, h.Score)
		fmt.Fprintln(opts.IO.Out, indentHit(h.Text, opts.IO.IsTTY()))
	}
	return nil
}

// daemonQueryTimeout bounds asking a running daemon before asking here.
const daemonQueryTimeout = 5 * time.Second

// knowledgeQueryDaemon asks the NERVE_HOME's daemon, when one is running,
// which keeps indexes open between queries (a turn's agent asks it again
// and again): a lexical query there skips opening the index. It never
// starts a daemon. ok is false when the daemon did not answer (none runs,
// an older one, a sandbox that forbids its socket, any error): the query
// then runs in this process, which gives the errors and their exit codes.
// A query with embeddings runs here too: it waits on the model's endpoint
// anyway.
func knowledgeQueryDaemon(ctx context.Context, opts *KnowledgeQueryOptions, roots []string, emb *knowledge.Embedder, warn func(string)) ([]knowledge.Hit, bool) {
	if emb != nil {
		return nil, false
	}
	abs := make([]string, len(roots))
	for i, r := range roots {
		a, err := filepath.Abs(r)
		if err != nil {
			return nil, false
		}
		abs[i] = a
	}
	ctx, cancel := context.WithTimeout(ctx, daemonQueryTimeout)
	defer cancel()
	c := controlClient(opts.Getenv)
	res, err := c.KnowledgeQuery(ctx, daemon.KnowledgeQueryRequest{Roots: abs, Text: opts.Text, Limit: opts.Limit})
	if err != nil {
		return nil, false
	}
	for _, w := range res.Warnings {
		warn(w)
	}
	return res.Hits, true
}

// indentHit indents a chunk's text; on a TTY it keeps the first lines,
// each cut to the terminal's usual width, and says how much it left out.
func indentHit(text string, trim bool) string {
	lines := strings.Split(text, "\n")
	more := 0
	if trim && len(lines) > ttyHitLines {
		more = len(lines) - ttyHitLines
		lines = lines[:ttyHitLines]
	}
	var b strings.Builder
	for i, l := range lines {
		l = strings.ReplaceAll(l, "\t", "    ")
		if trim && len([]rune(l)) > ttyHitCols {
			l = string([]rune(l)[:ttyHitCols-1]) + "…"
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("    " + l)
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n    … %d more lines", more)
	}
	return b.String()
}
