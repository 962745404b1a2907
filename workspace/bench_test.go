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

// BenchmarkFirstTurn is a thread's first turn on a machine (mirror clone
// and worktree: Open), beside the same `git clone --mirror` and `git
// worktree add` run by hand.
func BenchmarkFirstTurn(b *testing.B) {
	for _, size := range []string{"small", "large"} {
		b.Run(size, func(b *testing.B) { firstTurn(b, remoteOf(b, size)) })
	}
}

func firstTurn(b *testing.B, r *benchRemote) {
	b.Run("workspace", func(b *testing.B) {
		b.ReportMetric(float64(r.files), "files")
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			home, _ := os.MkdirTemp(b.TempDir(), "home-")
			m := &Manager{Home: home}
			b.StartTimer()
			_, err := m.Open(bg, Turn{Workspace: Workspace{Repo: r.url, Cloud: true, Base: r.head, Branch: "nerve/bench/thread-1"}, Key: "bench#thread-1"})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(home)
			b.StartTimer()
		}
	})
	b.Run("git-by-hand", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			home, _ := os.MkdirTemp(b.TempDir(), "home-")
			b.StartTimer()
			mirror := filepath.Join(home, "m.git")
			gitT(b, "", "clone", "--mirror", "-q", r.url, mirror)
			gitT(b, mirror, "worktree", "add", "-q", "--detach", filepath.Join(home, "wt"), r.head)
			b.StopTimer()
			os.RemoveAll(home)
			b.StartTimer()
		}
	})
}

// BenchmarkLaterTurn is the workspace's overhead on a later turn of a
// thread on the same machine: Open (reuse) and Finish of a one-file
// change (commit, changes, branch moved or pushed). git-by-hand is
// `git add -A && git commit` (and `git push`) of the same change.
func BenchmarkLaterTurn(b *testing.B) {
	for _, size := range []string{"small", "large"} {
		b.Run(size, func(b *testing.B) { laterTurn(b, remoteOf(b, size)) })
	}
}

func laterTurn(b *testing.B, r *benchRemote) {
	for _, cloud := range []bool{false, true} {
		kind := map[bool]string{false: "local", true: "cloud"}[cloud]
		b.Run(kind+"/workspace", func(b *testing.B) {
			repo := r.url
			if !cloud {
				repo = filepath.Join(b.TempDir(), "clone")
				gitT(b, "", "clone", "-q", r.url, repo)
			}
			m := &Manager{Home: b.TempDir()}
			ws, err := m.Start(bg, Workspace{Repo: repo, Cloud: cloud, Branch: BranchName("bench", "thread-"+strconv.Itoa(time.Now().Nanosecond()))})
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
			for i := 0; b.Loop(); i++ {
				turn.Step = i + 2
				tr, err := m.Open(bg, turn)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				write(b, filepath.Join(tr.Dir, "bench.txt"), strconv.Itoa(i)+"\n")
				b.StartTimer()
				res, err := tr.Finish(bg, "agent", Subject("author", turn.Step, "edit"))
				if err != nil {
					b.Fatal(err)
				}
				if res.Changes.Files != 1 {
					b.Fatalf("changes %+v", res.Changes)
				}
				turn.Head = res.Commit
			}
		})
		b.Run(kind+"/git-by-hand", func(b *testing.B) {
			wt := filepath.Join(b.TempDir(), "clone")
			gitT(b, "", "clone", "-q", r.url, wt)
			gitT(b, wt, "checkout", "-q", "-b", "by-hand")
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				write(b, filepath.Join(wt, "bench.txt"), strconv.Itoa(i)+"\n")
				b.StartTimer()
				gitT(b, wt, "add", "-A")
				gitT(b, wt, "commit", "-q", "-m", "edit")
				if cloud {
					gitT(b, wt, "push", "-q", "origin", "by-hand")
				}
			}
		})
	}
}
