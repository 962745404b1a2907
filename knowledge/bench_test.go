package knowledge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Benchmarks over a generated tree of benchFiles files (Go, TypeScript,
// Python, Markdown). The figures over the Go toolchain's own source tree
// are in goroot_test.go.
const benchFiles = 2000

var benchWords = strings.Fields(`lease claim turn signal bus thread workflow moderator adapter remote
	queue retry backoff heartbeat token config reload socket daemon sense reflex message event trace
	schema extract chunk index query vector model batch cache hash window section parser router handler`)

func word(i int) string { return benchWords[i%len(benchWords)] }

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// genTree writes n files of about 120 lines each under root.
func genTree(tb testing.TB, root string, n int) {
	files := map[string]string{}
	for i := range n {
		a, b, c := word(i), word(i/7+3), word(i/31+5)
		dir := fmt.Sprintf("%s/%s", a, b)
		switch i % 4 {
		case 0, 1:
			var s strings.Builder
			fmt.Fprintf(&s, "package %s\n\n", a)
			for j := range 5 {
				fmt.Fprintf(&s, "// %s%s%d handles the %s of a %s when the %s %s.\nfunc (x *%s%s) %s%s%d(ctx context.Context, n int) error {\n",
					title(b), title(c), j, word(i+j), word(i+2*j), word(j), word(i*j), title(a), title(b), title(c), title(word(j)), j)
				for k := range 18 {
					fmt.Fprintf(&s, "\tif err := x.%s%s(ctx, n+%d); err != nil {\n\t\treturn fmt.Errorf(\"%s %s: %%w\", err)\n\t}\n", word(k+i), title(word(k+j)), k, word(k), word(j+k+i))
				}
				s.WriteString("\treturn nil\n}\n\n")
			}
			files[fmt.Sprintf("%s/%s_%d.go", dir, c, i)] = s.String()
		case 2:
			var s strings.Builder
			for j := range 6 {
				fmt.Fprintf(&s, "/** %s the %s for each %s. */\nexport async function %s%s%d(input: %s): Promise<void> {\n", title(word(i+j)), b, c, word(j+i), title(a), j, title(b))
				for k := range 16 {
					fmt.Fprintf(&s, "  await %s.%s(input.%s_%d);\n", a, word(k+j), word(k), k)
				}
				s.WriteString("}\n\n")
			}
			files[fmt.Sprintf("%s/%s_%d.ts", dir, c, i)] = s.String()
		case 3:
			var s strings.Builder
			fmt.Fprintf(&s, "# %s %s\n\n", title(a), b)
			for j := range 6 {
				fmt.Fprintf(&s, "## %s and %s\n\n", title(word(i+j)), word(j))
				for k := range 15 {
					fmt.Fprintf(&s, "The %s keeps a %s per %s so that a %s can %s it later (%d).\n", word(k), word(k+j), word(i), word(k+i+j), word(j), k)
				}
				s.WriteString("\n")
			}
			files[fmt.Sprintf("docs/%s/%s_%d.md", a, c, i)] = s.String()
		}
	}
	writeTree(tb, root, files)
}

func benchRepo(b *testing.B) string {
	root := b.TempDir()
	os.Mkdir(filepath.Join(root, ".git"), 0o755)
	genTree(b, root, benchFiles)
	return root
}

func BenchmarkKnowledgeSyncCold(b *testing.B) {
	root := benchRepo(b)
	for b.Loop() {
		b.StopTimer()
		os.RemoveAll(filepath.Join(root, IndexDir))
		b.StartTimer()
		mustSync(b, SyncOptions{Root: root})
	}
	b.ReportMetric(float64(benchFiles)/b.Elapsed().Seconds()*float64(b.N), "files/s")
}

func BenchmarkKnowledgeSyncWarm(b *testing.B) {
	root := benchRepo(b)
	mustSync(b, SyncOptions{Root: root})
	for b.Loop() {
		if r := mustSync(b, SyncOptions{Root: root}); r.Unchanged != benchFiles {
			b.Fatalf("warm sync: %+v", r)
		}
	}
}

func BenchmarkKnowledgeSyncOneEdit(b *testing.B) {
	root := benchRepo(b)
	mustSync(b, SyncOptions{Root: root})
	target := filepath.Join(root, "docs", "edited.md")
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		os.WriteFile(target, []byte(fmt.Sprintf("# Edited\n\nVersion %d of this file.\n", i)), 0o644)
		b.StartTimer()
		mustSync(b, SyncOptions{Root: root})
	}
}

var benchQuestions = []string{
	"how is the lease renewed with backoff", "signal bus", "HeartbeatToken",
	"where is the config reloaded", "router handler for each message", "retry_queue",
	"vector cache hash", "which adapter runs the workflow", "schema extract", "daemon socket event",
}

func benchQuery(b *testing.B, root string, emb *Embedder) {
	var lat []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if _, err := Query(context.Background(), []string{root}, QueryOptions{Text: benchQuestions[i%len(benchQuestions)], Embedder: emb}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		i++
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

func BenchmarkKnowledgeQuery(b *testing.B) {
	root := benchRepo(b)
	mustSync(b, SyncOptions{Root: root})
	benchQuery(b, root, nil)
}

func BenchmarkKnowledgeQueryHybrid(b *testing.B) {
	root := benchRepo(b)
	fe := newFakeEmbedder(b, 1024)
	emb := fe.embedder("bench-1024")
	mustSync(b, SyncOptions{Root: root, Embedder: emb})
	benchQuery(b, root, emb)
}
