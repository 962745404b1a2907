package knowledge

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// writeTree writes files (slash path -> content) under root.
func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		abs := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newRepo makes a repository (a dir with .git) holding files.
func newRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, root, files)
	return root
}

func mustSync(t testing.TB, opts SyncOptions) *SyncResult {
	t.Helper()
	res, err := Sync(context.Background(), opts)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return res
}

func paths(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Path)
	}
	return out
}

// fakeEmbedder is an OpenAI-compatible /v1/embeddings server on loopback.
// Its vectors hash each token of the text into dim buckets (feature
// hashing), so texts sharing words are close: enough to test fusion.
type fakeEmbedder struct {
	srv *httptest.Server
	dim int

	mu       sync.Mutex
	requests int
	inputs   int
	models   map[string]int
	fail     int // answer this status to every request when non-zero
}

func newFakeEmbedder(t testing.TB, dim int) *fakeEmbedder {
	f := &fakeEmbedder{dim: dim, models: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEmbedder) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req embedRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests++
	f.inputs += len(req.Input)
	f.models[req.Model] += len(req.Input)
	fail, dim := f.fail, f.dim
	f.mu.Unlock()
	if fail != 0 {
		w.WriteHeader(fail)
		fmt.Fprintf(w, `{"error":{"message":"model %s is not loaded"}}`, req.Model)
		return
	}
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Data []item `json:"data"`
	}{}
	for i, in := range req.Input {
		out.Data = append(out.Data, item{Index: i, Embedding: hashVector(req.Model+"|", in, dim)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// hashVector embeds text by feature hashing its tokens; seed makes two
// models' vectors differ.
func hashVector(seed, text string, dim int) []float32 {
	v := make([]float32, dim)
	forEachToken(text, func(tok string) {
		h := fnv.New64a()
		h.Write([]byte(seed + tok))
		x := h.Sum64()
		sign := float32(1)
		if x&1 == 1 {
			sign = -1
		}
		v[(x>>1)%uint64(dim)] += sign
	})
	v[0] += 0.01 // never all zero
	return v
}

func (f *fakeEmbedder) counts() (requests, inputs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, f.inputs
}

func (f *fakeEmbedder) embedder(model string) *Embedder {
	return &Embedder{BaseURL: f.srv.URL + "/v1", Model: model, RetryWait: time.Millisecond}
}

// downURL is the base URL of an endpoint nobody listens on.
func downURL(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1"
}

func timeNow() time.Time { return time.Now() }

func newStaticServer(t testing.TB, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
