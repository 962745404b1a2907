package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/knowledge"
)

// TestKnowledgeQueryAPI: the daemon's answers to good and bad queries,
// as a CLI (or anything on the socket) gets them.
func TestKnowledgeQueryAPI(t *testing.T) {
	repo := t.TempDir()
	os.Mkdir(filepath.Join(repo, ".git"), 0o700)
	os.WriteFile(filepath.Join(repo, "lease.go"), []byte("package lease\n\n// Renew extends a claimed turn's lease.\nfunc Renew() {}\n"), 0o600)
	if _, err := knowledge.Sync(context.Background(), knowledge.SyncOptions{Root: repo}); err != nil {
		t.Fatal(err)
	}
	noIndex := t.TempDir()
	d := &Daemon{}
	defer d.knowledge.Close()
	ask := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		d.handleKnowledgeQuery(rec, httptest.NewRequest(http.MethodPost, "/v1/knowledge/query", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	query := func(roots []string, text string) string {
		b, _ := json.Marshal(KnowledgeQueryRequest{Roots: roots, Text: text, Limit: 3})
		return string(b)
	}
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"a hit", query([]string{repo}, "renew the lease"), 200, `"path":"lease.go"`},
		{"no index", query([]string{noIndex}, "renew"), 404, `"hint":"run ` + "`nerve knowledge sync"},
		{"no words", query([]string{repo}, "!!! ??"), 400, "no words to search for"},
		{"relative root", query([]string{"repo"}, "renew"), 400, "must be an absolute path"},
		{"malformed", `{"roots": [`, 400, "malformed request"},
	} {
		code, body := ask(tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	if n := d.knowledgeQueries.Load(); n != 1 {
		t.Errorf("%d queries counted, want the one answered", n)
	}
}
