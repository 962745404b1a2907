package knowledge

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestKnowledgeEmbedSync(t *testing.T) {
	fe := newFakeEmbedder(t, 64)
	files := map[string]string{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		files[name+".go"] = goFile("Func" + strings.ToUpper(name))
	}
	files["copy.go"] = files["a.go"] // same text: embedded once
	root := newRepo(t, files)
	emb := fe.embedder("m1")
	emb.BatchSize = 2

	r := mustSync(t, SyncOptions{Root: root, Embedder: emb})
	reqs, inputs := fe.counts()
	if r.Chunks != 6 || r.Embedded != 5 || inputs != 5 || reqs != 3 || r.Model != "m1" {
		t.Fatalf("cold: %+v; %d requests, %d inputs", r, reqs, inputs)
	}

	// Nothing new: one probe of one text (is the model still the same?).
	r = mustSync(t, SyncOptions{Root: root, Embedder: emb})
	if reqs2, inputs2 := fe.counts(); reqs2 != reqs+1 || inputs2 != inputs+1 || r.Embedded != 0 || r.EmbedCached != 5 {
		t.Errorf("warm: %+v; requests %d -> %d", r, reqs, reqs2)
	}

	// A rename keeps the text: its vector is cached.
	writeTree(t, root, map[string]string{"f.go": files["b.go"]})
	r = mustSync(t, SyncOptions{Root: root, Embedder: emb})
	if r.Added != 1 || r.Embedded != 0 {
		t.Errorf("copy: %+v", r)
	}
	// An edit embeds the changed chunk only.
	writeTree(t, root, map[string]string{"c.go": goFile("FuncC") + "\nfunc Extra() {\n" + body(12) + "}\n"})
	r = mustSync(t, SyncOptions{Root: root, Embedder: emb})
	if r.Updated != 1 || r.Embedded != 1 {
		t.Errorf("edit: %+v", r)
	}

	// Another model: every text again, under its own name; m1's vectors stay.
	emb2 := fe.embedder("m2")
	r = mustSync(t, SyncOptions{Root: root, Embedder: emb2})
	if r.Embedded != r.Chunks-2 || fe.models["m2"] != r.Embedded { // two duplicate texts
		t.Errorf("model change: %+v, m2 inputs %d", r, fe.models["m2"])
	}
	db, _ := openForRead(root, false)
	var m1, m2 int
	db.QueryRow(`SELECT count(*) FROM vectors WHERE model = 'm1'`).Scan(&m1)
	db.QueryRow(`SELECT count(*) FROM vectors WHERE model = 'm2'`).Scan(&m2)
	db.Close()
	if m1 != m2 || m1 == 0 {
		t.Errorf("vectors per model: m1 %d, m2 %d", m1, m2)
	}
}

func TestKnowledgeEmbedDownKeepsLexical(t *testing.T) {
	root := newRepo(t, corpus)
	emb := &Embedder{BaseURL: downURL(t), Model: "nomic-embed-text"}
	res, err := Sync(context.Background(), SyncOptions{Root: root, Embedder: emb})
	var ee *EmbedError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("err = %v, want EmbedError", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "connection refused") || strings.Count(msg, "127.0.0.1") != 1 {
		t.Errorf("error is not one clear line: %q", msg)
	}
	if res == nil || res.Added != len(corpus) {
		t.Errorf("lexical part not done: %+v", res)
	}
	// The lexical index answers; the query warns and ranks by words.
	var warned []string
	hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: "signal bus", Embedder: emb,
		Warn: func(s string) { warned = append(warned, s) }})
	if err != nil || len(hits) == 0 || hits[0].Path != "bus/bus.go" || len(warned) != 1 {
		t.Errorf("query with endpoint down: %v %v %q", paths(hits), err, warned)
	}
}

func TestKnowledgeEmbedRefusesAndRetries(t *testing.T) {
	fe := newFakeEmbedder(t, 16)
	root := newRepo(t, map[string]string{"a.go": goFile("A")})
	fe.fail = http.StatusInternalServerError
	_, err := Sync(context.Background(), SyncOptions{Root: root, Embedder: fe.embedder("m")})
	if err == nil || !strings.Contains(err.Error(), "HTTP 500: model m is not loaded") {
		t.Fatalf("err = %v", err)
	}
	if reqs, _ := fe.counts(); reqs != 3 {
		t.Errorf("5xx tried %d times, want 3", reqs)
	}
	fe.fail = http.StatusUnauthorized
	_, err = Sync(context.Background(), SyncOptions{Root: root, Embedder: fe.embedder("m")})
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("err = %v", err)
	}
	if reqs, _ := fe.counts(); reqs != 4 {
		t.Errorf("401 retried: %d requests", reqs)
	}
	// Once vectors are stored, a sync with nothing to embed still finds
	// the endpoint down (its probe fails).
	fe.fail = 0
	if r := mustSync(t, SyncOptions{Root: root, Embedder: fe.embedder("m")}); r.Embedded != 1 {
		t.Errorf("after recovery: %+v", r)
	}
	fe.fail = http.StatusBadGateway
	if _, err := Sync(context.Background(), SyncOptions{Root: root, Embedder: fe.embedder("m")}); err == nil || !strings.Contains(err.Error(), "HTTP 502") {
		t.Errorf("warm sync with the endpoint failing: %v", err)
	}
}

func TestKnowledgeHybridQuery(t *testing.T) {
	fe := newFakeEmbedder(t, 256)
	root := newRepo(t, corpus)
	emb := fe.embedder("m")
	mustSync(t, SyncOptions{Root: root, Embedder: emb})
	hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: "signal bus subscriber", Embedder: emb, Limit: 3})
	if err != nil || len(hits) == 0 || hits[0].Path != "bus/bus.go" {
		t.Fatalf("hybrid: %v %v", paths(hits), err)
	}
	if hits[0].Score <= 0 || hits[0].Score > 2.0/rrfK {
		t.Errorf("hybrid score %v is not a fused rank", hits[0].Score)
	}
	// Vectors of another model are never compared with this one's.
	var warned []string
	hits, err = Query(context.Background(), []string{root}, QueryOptions{Text: "signal bus", Embedder: fe.embedder("other"), Limit: 3,
		Warn: func(s string) { warned = append(warned, s) }})
	if err != nil || len(hits) == 0 || len(warned) != 1 || !strings.Contains(warned[0], "no vectors of model other") {
		t.Errorf("other model: %v %v %q", paths(hits), err, warned)
	}
	// A stale sketch (chunks changed since) is not used: the full scan still finds new text.
	writeTree(t, root, map[string]string{"z.md": "# Zebra\n\nZebras graze the savanna.\n"})
	mustSync(t, SyncOptions{Root: root})
	db, _ := openForRead(root, false)
	qv := hashVector("m|", "zebras graze", 256)
	normalize(qv)
	_, ok, _ := sketchCandidates(context.Background(), db, "m", qv, 10)
	db.Close()
	if ok {
		t.Errorf("sketch of an older generation was used")
	}
}

func TestKnowledgeEmbedBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string
	}{
		{`{"data":[]}`, "asked for 1 embeddings, got 0"},
		{`not json`, "not embeddings JSON"},
		{`{"data":[{"index":0,"embedding":[0,0]}]}`, "zero or not a number"},
	} {
		srv := newStaticServer(t, tc.body)
		e := &Embedder{BaseURL: srv, Model: "m"}
		_, err := e.Embed(context.Background(), []string{"x"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v", tc.body, err)
		}
	}
}

// The model behind a name changed (another dimension): its old vectors
// are dropped and every text embedded again, never mixed.
func TestKnowledgeEmbedDimensionChange(t *testing.T) {
	fe := newFakeEmbedder(t, 16)
	root := newRepo(t, corpus)
	emb := fe.embedder("m")
	first := mustSync(t, SyncOptions{Root: root, Embedder: emb})
	fe.mu.Lock()
	fe.dim = 32
	fe.mu.Unlock()
	r := mustSync(t, SyncOptions{Root: root, Embedder: emb})
	if r.Embedded != first.Embedded || r.Embedded == 0 {
		t.Errorf("after the dimension changed: %+v (first %+v)", r, first)
	}
	db, _ := openForRead(root, false)
	var dims int
	db.QueryRow(`SELECT count(DISTINCT dim) FROM vectors WHERE model = 'm'`).Scan(&dims)
	db.Close()
	if dims != 1 {
		t.Errorf("%d dimensions stored for one model", dims)
	}
	hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: "signal bus", Embedder: emb})
	if err != nil || len(hits) == 0 || hits[0].Path != "bus/bus.go" {
		t.Errorf("query after the change: %v %v", paths(hits), err)
	}
}
