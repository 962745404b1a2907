package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// benchRemote is a bare repository, packed, reached by file:// URL so
// that a clone transfers a pack as it would over the network.
type benchRemote struct {
	url   string
	head  string
	files int
}

var (
	benchOnce  sync.Map // size -> *benchRemote
	benchMu    sync.Mutex
	benchTemps []string
)

// remoteOf builds the small or large benchmark remote once per run: small
// is newRepo's three files, large a copy of $GOROOT/src.
func remoteOf(b *testing.B, size string) *benchRemote {
	benchMu.Lock()
	defer benchMu.Unlock()
	if r, ok := benchOnce.Load(size); ok {
		return r.(*benchRemote)
	}
	root, err := os.MkdirTemp("", "nerve-ws-bench-")
	if err != nil {
		b.Fatal(err)
	}
	benchTemps = append(benchTemps, root)
	src := filepath.Join(root, "src")
	if size == "large" {
		if testing.Short() {
			b.Skip("the large repository takes a while to build; not with -short")
		}
		start := time.Now()
		if out, err := exec.Command("cp", "-r", filepath.Join(runtime.GOROOT(), "src"), src).CombinedOutput(); err != nil {
			b.Fatalf("copy GOROOT/src: %v\n%s", err, out)
		}
		gitT(b, src, "init", "-q", "-b", "main")
		gitT(b, src, "add", "-A")
		gitT(b, src, "commit", "-q", "-m", "go source")
		b.Logf("built the large repository in %v", time.Since(start).Round(time.Millisecond))
	} else {
		src = newRepo(b)
	}
	bare := filepath.Join(root, "remote.git")
	gitT(b, "", "clone", "-q", "--bare", "--no-local", src, bare)
	gitT(b, bare, "repack", "-adq")
	list := gitT(b, bare, "ls-tree", "-r", "HEAD")
	r := &benchRemote{url: "file://" + bare, head: gitT(b, bare, "rev-parse", "HEAD"), files: countLines(list)}
	benchOnce.Store(size, r)
	return r
}

func countLines(s string) int {
	n := 0
	for i := range len(s) {
		if s[i] == '\n' {
			n++
		}
	}
	return n + 1
}

// pair times the workspace and git by hand in the same iterations,
// alternating which goes first, so that the load of a shared machine
// weighs on both alike; it reports each in ms/op and their ratio.
type pair struct{ ws, git time.Duration }

func (p *pair) time(d *time.Duration, f func()) {
	start := time.Now()
	f()
	*d += time.Since(start)
}

func (p *pair) report(b *testing.B, n int) {
	ws := float64(p.ws.Microseconds()) / 1000 / float64(n)
	git := float64(p.git.Microseconds()) / 1000 / float64(n)
	b.ReportMetric(ws, "ws-ms/op")
	b.ReportMetric(git, "git-ms/op")
	b.ReportMetric(ws/git, "ws/git")
}

// BenchmarkFirstTurn is a thread's first turn on a machine (mirror clone
// and worktree: Open on an empty NERVE_HOME), beside the same `git clone
// --mirror` and `git worktree add` run by hand, over file://.
func BenchmarkFirstTurn(b *testing.B) {
	for _, size := range []string{"small", "large"} {
		b.Run(size, func(b *testing.B) {
			r := remoteOf(b, size)
			var p pair
			n := 0
			for b.Loop() {
				home := b.TempDir()
				ws := func() {
					m := &Manager{Home: filepath.Join(home, "nerve")}
					if _, err := m.Open(bg, Turn{Workspace: Workspace{Repo: r.url, Cloud: true, Base: r.head, Branch: "nerve/bench/thread-1"}, Key: "bench#thread-1"}); err != nil {
						b.Fatal(err)
					}
				}
				git := func() {
					mirror := filepath.Join(home, "by-hand", "m.git")
					gitT(b, "", "clone", "--mirror", "-q", r.url, mirror)
					gitT(b, mirror, "worktree", "add", "-q", "--detach", filepath.Join(home, "by-hand", "wt"), r.head)
				}
				if n%2 == 0 {
					p.time(&p.ws, ws)
					p.time(&p.git, git)
				} else {
					p.time(&p.git, git)
					p.time(&p.ws, ws)
				}
				n++
				os.RemoveAll(home)
			}
			p.report(b, n)
			b.ReportMetric(float64(r.files), "files")
		})
	}
}

// BenchmarkLaterTurn is the workspace's overhead on a later turn of a
// thread on the same machine: Open (reuse) and Finish of a one-file
// change (commit, changes, the branch moved or pushed), beside `git add -A
// && git commit` (and `git push`) of the same change by hand.
func BenchmarkLaterTurn(b *testing.B) {
	for _, size := range []string{"small", "large"} {
		for _, cloud := range []bool{false, true} {
			kind := map[bool]string{false: "local", true: "cloud"}[cloud]
			b.Run(size+"/"+kind, func(b *testing.B) { laterTurn(b, remoteOf(b, size), cloud) })
		}
	}
}

func laterTurn(b *testing.B, r *benchRemote, cloud bool) {
	repo := r.url
	if !cloud {
		repo = filepath.Join(b.TempDir(), "clone")
		gitT(b, "", "clone", "-q", r.url, repo)
	}
	m := &Manager{Home: b.TempDir()}
	ws, err := m.Start(bg, Workspace{Repo: repo, Cloud: cloud, Branch: BranchName("bench", "thread-"+strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		b.Fatal(err)
	}
	turn := Turn{Workspace: ws, Key: "bench#" + ws.Branch}
	tr, err := m.Open(bg, turn)
	if err != nil {
		b.Fatal(err)
	}
	res, err := tr.Finish(bg, "agent", "warm")
	if err != nil {
		b.Fatal(err)
	}
	turn.Head = res.Commit

	byHand := filepath.Join(b.TempDir(), "by-hand")
	gitT(b, "", "clone", "-q", r.url, byHand)
	gitT(b, byHand, "checkout", "-q", "-b", "by-hand-"+strconv.FormatInt(time.Now().UnixNano(), 36))

	var p pair
	n := 0
	for b.Loop() {
		turn.Step = n + 2
		wsTurn := func() {
			tr, err := m.Open(bg, turn)
			if err != nil {
				b.Fatal(err)
			}
			write(b, filepath.Join(tr.Dir, "bench.txt"), strconv.Itoa(n)+"\n")
			res, err := tr.Finish(bg, "agent", Subject("author", turn.Step, "edit"))
			if err != nil {
				b.Fatal(err)
			}
			if res.Changes.Files != 1 {
				b.Fatalf("changes %+v", res.Changes)
			}
			turn.Head = res.Commit
		}
		gitTurn := func() {
			write(b, filepath.Join(byHand, "bench.txt"), strconv.Itoa(n)+"\n")
			gitT(b, byHand, "add", "-A")
			gitT(b, byHand, "commit", "-q", "-m", "edit")
			if cloud {
				gitT(b, byHand, "push", "-q", "origin", "HEAD")
			}
		}
		if n%2 == 0 {
			p.time(&p.ws, wsTurn)
			p.time(&p.git, gitTurn)
		} else {
			p.time(&p.git, gitTurn)
			p.time(&p.ws, wsTurn)
		}
		n++
	}
	p.report(b, n)
}
