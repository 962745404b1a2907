package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"

	"github.com/nerve-agents/nerve/knowledge"
)

// KnowledgeQueryRequest is a lexical query of repositories' knowledge
// indexes (`nerve knowledge query` with no embeddings configured).
type KnowledgeQueryRequest struct {
	Roots []string `json:"roots"` // absolute repository roots
	Text  string   `json:"text"`
	Limit int      `json:"limit"`
}

// KnowledgeQueryResult is its ranked hits and the warnings the query
// would have printed.
type KnowledgeQueryResult struct {
	Hits     []knowledge.Hit `json:"hits"`
	Warnings []string        `json:"warnings,omitempty"`
}

// handleKnowledgeQuery answers from the indexes the daemon keeps open: a
// CLI query then costs the process's start and a query on a warm index,
// not the opening of a cold one. The CLI asks here only when a daemon is
// already running, and asks locally on any error, so the error messages
// and exit codes stay the CLI's own.
func (d *Daemon) handleKnowledgeQuery(w http.ResponseWriter, r *http.Request) {
	var req KnowledgeQueryRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, "malformed request: "+err.Error(), "")
		return
	}
	d.knowledgeQuery(w, r, req)
}

// knowledgeQuery answers req from the open indexes.
func (d *Daemon) knowledgeQuery(w http.ResponseWriter, r *http.Request, req KnowledgeQueryRequest) {
	for _, root := range req.Roots {
		if !filepath.IsAbs(root) {
			writeError(w, http.StatusBadRequest, codeUsage, "a repository root must be an absolute path: "+root, "")
			return
		}
	}
	out := KnowledgeQueryResult{}
	hits, err := d.knowledge.Query(r.Context(), req.Roots, knowledge.QueryOptions{
		Text: req.Text, Limit: req.Limit,
		Warn: func(msg string) { out.Warnings = append(out.Warnings, msg) },
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	out.Hits = hits
	d.knowledgeQueries.Add(1)
	writeJSON(w, http.StatusOK, out)
}

// KnowledgeQuery asks the daemon's open indexes.
func (c *Client) KnowledgeQuery(ctx context.Context, req KnowledgeQueryRequest) (*KnowledgeQueryResult, error) {
	var out KnowledgeQueryResult
	return &out, c.do(ctx, http.MethodPost, "/v1/knowledge/query", req, &out)
}
