package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// BenchmarkRemoteTurn measures a remote turn through a real daemon: claim
// → exec adapter `true` → response → moderator → next claim, one thread of
// b.N sequential turns on a real Khala server. Run with -benchtime 200x.
// p50-ms is the median time between consecutive answers in the trace.
// floor-ms, measured in the same run, is what a turn cannot do without:
// a bare fork+exec of `true` and two durable bbolt commits (the daemon's
// outbox, the server's answer), each at its median. "watched" runs the
// thread attached (`workflow run` follows its event stream and prints
// progress, on the same two cores); "unwatched" detaches and waits.
func BenchmarkRemoteTurn(b *testing.B) {
	b.Run("watched", func(b *testing.B) { benchRemoteTurn(b, true) })
	b.Run("unwatched", func(b *testing.B) { benchRemoteTurn(b, false) })
}

func benchRemoteTurn(b *testing.B, watched bool) {
	floor := remoteTurnFloor(b)
	k := startKhala(b)
	tok := k.enrollToken(b, 1)
	home, _ := os.MkdirTemp("", "nbr")
	defer os.RemoveAll(home)
	env := append(os.Environ(), "NERVE_HOME="+home)
	run := func(args ...string) string {
		cmd := exec.Command(nerveBin(b), args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("nerve %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	truePath, _ := exec.LookPath("true")
	os.WriteFile(filepath.Join(home, "nerve.yaml"), []byte(fmt.Sprintf(`agent: {name: bench, max_concurrent_turns: 1}
remotes:
  origin: {url: "%s"}
adapters:
  t: {type: exec, command: [%s]}
senses:
  - {name: q, kind: khala, remote: origin}
reflexes:
  - {on: q, do: turn, adapter: t}
`, k.url, truePath)), 0o600)
	run("init", "--remote", "origin="+k.url, "--enroll-token", tok)
	def := filepath.Join(home, "loop.yaml")
	os.WriteFile(def, []byte(`workflow: loop
moderator: 'step < input.n ? {"role": "w"} : {"done": true}'
inputs: {n: {type: integer}}
limits: {max_steps: 100000}
roles:
  w: {adapter: x, prompt: p}
`), 0o600)
	run("workflow", "push", def, "origin")
	run("daemon", "start")
	defer run("daemon", "stop")
	args := []string{"workflow", "run", "origin/loop", "-i", "n=" + strconv.Itoa(b.N), "--json"}
	if !watched {
		args = append(args, "--detach")
	}
	b.ResetTimer()
	out := run(args...)
	var res struct{ Thread, Status string }
	json.Unmarshal([]byte(out), &res)
	if !watched {
		res.Status = waitRemoteThread(b, k.url, home, res.Thread)
	}
	b.StopTimer()
	if res.Status != "completed" {
		b.Fatalf("thread: %s (%s)", out, res.Status)
	}
	trace := run("workflow", "logs", res.Thread, "--json")
	var ats []time.Time
	for _, l := range strings.Split(strings.TrimSpace(trace), "\n") {
		var m struct {
			At time.Time `json:"at"`
		}
		json.Unmarshal([]byte(l), &m)
		ats = append(ats, m.At)
	}
	var gaps []float64
	for i := 1; i < len(ats); i++ {
		gaps = append(gaps, float64(ats[i].Sub(ats[i-1]).Microseconds())/1000)
	}
	sort.Float64s(gaps)
	if len(gaps) > 0 {
		b.ReportMetric(gaps[len(gaps)/2], "p50-ms")
		b.ReportMetric(gaps[len(gaps)*95/100], "p95-ms")
		b.ReportMetric(floor, "floor-ms")
	}
	b.ReportMetric(float64(b.N), "turns")
}

// waitRemoteThread polls the thread's status (every 20 ms, a plain GET) until
// it is no longer running, and returns it.
func waitRemoteThread(b *testing.B, url, home, ref string) string {
	tok, err := os.ReadFile(filepath.Join(home, "tokens", "origin"))
	if err != nil {
		b.Fatal(err)
	}
	id := ref[strings.LastIndexByte(ref, '#')+1:]
	for {
		req, _ := http.NewRequest("GET", url+"/v1/threads/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var th struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&th)
		resp.Body.Close()
		if th.Status != "running" {
			return th.Status
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remoteTurnFloor is the median of 200 bare execs of `true` plus twice the
// median of 200 bbolt commits, in milliseconds.
func remoteTurnFloor(b *testing.B) float64 {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(b.TempDir(), "floor.db"), 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 600)
	var execs, commits []float64
	for i := range 200 {
		start := time.Now()
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
		execs = append(execs, float64(time.Since(start).Microseconds())/1000)
		start = time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return bk.Put([]byte(strconv.Itoa(i)), val)
		})
		if err != nil {
			b.Fatal(err)
		}
		commits = append(commits, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(execs)
	sort.Float64s(commits)
	return execs[len(execs)/2] + 2*commits[len(commits)/2]
}

// BenchmarkIdleDaemonWithRemote reports the daemon's memory and CPU while
// its khala sense long-polls an idle queue for a few seconds.
func BenchmarkIdleDaemonWithRemote(b *testing.B) {
	k := startKhala(b)
	tok := k.enrollToken(b, 1)
	home, _ := os.MkdirTemp("", "nbi")
	defer os.RemoveAll(home)
	env := append(os.Environ(), "NERVE_HOME="+home)
	run := func(args ...string) {
		cmd := exec.Command(nerveBin(b), args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("nerve %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(home, "nerve.yaml"), []byte(fmt.Sprintf(`remotes:
  origin: {url: "%s"}
adapters:
  t: {type: exec, command: [true]}
senses:
  - {name: q, kind: khala, remote: origin}
reflexes:
  - {on: q, do: turn, adapter: t}
`, k.url)), 0o600)
	run("init", "--remote", "origin="+k.url, "--enroll-token", tok)
	run("daemon", "start")
	defer run("daemon", "stop")
	pidb, _ := os.ReadFile(filepath.Join(home, "nerve.pid"))
	pid := strings.TrimSpace(string(pidb))
	time.Sleep(time.Second)
	n, err := strconv.Atoi(pid)
	if err != nil {
		b.Fatalf("nerve.pid: %v", err)
	}
	cpu0 := procCPU(b, n)
	const window = 5 * time.Second
	time.Sleep(window)
	cpu := procCPU(b, n) - cpu0
	b.ReportMetric(procRSS(b, pid), "MiB")
	b.ReportMetric(100*cpu.Seconds()/window.Seconds(), "cpu-%")
	for i := 0; i < b.N; i++ {
	}
}

// procCPU is a process's user and system time so far.
func procCPU(tb testing.TB, pid int) time.Duration {
	d, err := procstat.CPU(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func procRSS(b *testing.B, pid string) float64 {
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
