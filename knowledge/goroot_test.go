package knowledge

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKnowledgeGorootFigures measures what issue 8 asks over a copy of the
// Go toolchain's own source tree: sync cold, warm and after one edit; query
// latency, lexical and hybrid (1,024-dimension vectors from a fake
// endpoint); index size; peak RSS of sync and query (child processes); and
// the share of testdata/goroot-questions.txt answered in the top 5. It
// takes minutes, so it runs only with NERVE_KNOWLEDGE_GOROOT=1:
//
//	NERVE_KNOWLEDGE_GOROOT=1 go test -run GorootFigures -v -timeout 30m ./knowledge/
func TestKnowledgeGorootFigures(t *testing.T) {
	if os.Getenv("NERVE_KNOWLEDGE_GOROOT") == "" {
		t.Skip("set NERVE_KNOWLEDGE_GOROOT=1 to measure over $(go env GOROOT)/src")
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go env GOROOT: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "src")
	if err := exec.Command("cp", "-r", filepath.Join(strings.TrimSpace(string(out)), "src"), root).Run(); err != nil {
		t.Fatal(err)
	}
	files, lines := treeSize(t, root)
	t.Logf("tree: %d files, %d lines", files, lines)

	d, rss := childRun(t, "sync", root)
	t.Logf("sync cold (lexical): %.1fs, peak RSS %d MiB", d.Seconds(), rss>>20)
	d, rss = childRun(t, "sync", root)
	t.Logf("sync warm, nothing changed: %.2fs, peak RSS %d MiB", d.Seconds(), rss>>20)
	f, err := os.OpenFile(filepath.Join(root, "time", "format.go"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n// An edit for the benchmark.\n")
	f.Close()
	d, _ = childRun(t, "sync", root)
	t.Logf("sync after editing one file: %.2fs", d.Seconds())
	t.Logf("index size (lexical): %d MiB", dirSize(t, filepath.Join(root, IndexDir))>>20)

	qs := loadQuestions(t)
	p50, p95, top5 := measureQueries(t, root, qs, nil)
	t.Logf("query lexical: p50 %.1fms p95 %.1fms; top-5 %d/%d (%.0f%%)", ms(p50), ms(p95), top5, len(qs), 100*float64(top5)/float64(len(qs)))
	_, rss = childRun(t, "query", root+" where are RFC 3339 timestamps parsed")
	t.Logf("query process peak RSS %d MiB", rss>>20)

	fe := newFakeEmbedder(t, 1024)
	emb := fe.embedder("fake-1024")
	emb.BatchSize = 128
	t0 := time.Now()
	r := mustSync(t, SyncOptions{Root: root, Embedder: emb})
	t.Logf("sync embedding %d texts (1,024 dims, fake endpoint on loopback): %.1fs", r.Embedded, time.Since(t0).Seconds())
	t.Logf("index size (with vectors): %d MiB", dirSize(t, filepath.Join(root, IndexDir))>>20)
	p50, p95, top5 = measureQueries(t, root, qs, emb)
	t.Logf("query hybrid: p50 %.1fms p95 %.1fms; top-5 %d/%d (vectors are feature hashes, not a model)", ms(p50), ms(p95), top5, len(qs))
}

type question struct {
	q     string
	files []string
}

func loadQuestions(t testing.TB) []question {
	f, err := os.Open("testdata/goroot-questions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []question
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		q, files, _ := strings.Cut(l, "|")
		var fs []string
		for _, p := range strings.Split(files, ",") {
			fs = append(fs, strings.TrimSpace(p))
		}
		out = append(out, question{strings.TrimSpace(q), fs})
	}
	return out
}

// measureQueries runs every question five times; the first run of each
// also checks its answer.
func measureQueries(t *testing.T, root string, qs []question, emb *Embedder) (p50, p95 time.Duration, top5 int) {
	var lat []time.Duration
	for _, q := range qs {
		for i := range 5 {
			t0 := time.Now()
			hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: q.q, Limit: 5, Embedder: emb})
			lat = append(lat, time.Since(t0))
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 {
				continue
			}
			rank := -1
			for j, h := range hits {
				for _, f := range q.files {
					if h.Path == f && rank < 0 {
						rank = j
					}
				}
			}
			if rank >= 0 {
				top5++
			}
			t.Logf("  %-50q rank %d  (top: %s)", q.q, rank+1, strings.Join(paths(hits[:min(2, len(hits))]), ", "))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*95/100], top5
}

// childRun runs this test binary as a child doing one sync or query (see
// TestMain) and returns its wall time and peak RSS.
func childRun(t *testing.T, what, args string) (time.Duration, int64) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+what+" "+args)
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v", what, args, err)
	}
	d := time.Since(t0)
	return d, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
}

func treeSize(t *testing.T, root string) (files, lines int) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
			if b, err := os.ReadFile(p); err == nil {
				lines += strings.Count(string(b), "\n")
			}
		}
		return nil
	})
	return files, lines
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if st, err := d.Info(); err == nil {
				n += st.Size()
			}
		}
		return nil
	})
	return n
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
