package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb/khalabolt"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/khala"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

// The Khala benchmarks run a real `nerve khala serve` process on loopback
// and drive it over HTTP, the way agents do:
//
//	go test ./cmd/nerve -run '^$' -bench Khala
//
// BenchmarkKhalaBoltCommit is the floor the others stand on: one bbolt
// write transaction (two fsyncs) on the same disk.

func BenchmarkKhalaBoltCommit(b *testing.B) {
	st, err := khalabolt.Open(filepath.Join(b.TempDir(), "floor.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var lat []time.Duration
	for b.Loop() {
		for range floorCommits { // a median, whatever -benchtime says
			start := time.Now()
			if _, err := khala.IssueEnrollToken(b.Context(), st, 1, 0, time.Now()); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.ReportMetric(khPct(lat, 50), "p50-ms/commit")
}

// floorCommits is how many commits a floor benchmark times per op.
const floorCommits = 200

// khBench is a deployment the benchmarks run on: one bbolt server, or
// PostgreSQL replicas over one database of the test binary's cluster.
type khBench struct {
	name     string
	replicas int
}

var khBenches = []khBench{{"bolt", 1}, {"postgres", 3}}

// setup starts the deployment (replicas: 1 for a single-server figure)
// with n agents spread over its servers and khRelayWF published. size
// reports the database's size in bytes.
func (kb khBench) setup(b *testing.B, replicas, n int) (ps []*khProc, agents []*khClient, size func() int64) {
	b.Helper()
	if kb.name == "bolt" {
		p, agents, db := khSetup(b, n)
		return []*khProc{p}, agents, func() int64 {
			fi, err := os.Stat(db)
			if err != nil {
				b.Fatal(err)
			}
			return fi.Size()
		}
	}
	dsn := pgtest.Database(b)
	ps, enroll := khReplicas(b, dsn, replicas, n)
	agents = khAgents(b, ps, enroll, "agent", n)
	agents[0].must(b, "PUT", "/v1/workflows/relay", map[string]string{"source": khRelayWF}, 201, nil)
	return ps, agents, func() int64 { return khPGSize(b, dsn) }
}

func khPGSize(b *testing.B, dsn string) int64 {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT pg_database_size(current_database())").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// The PostgreSQL floor: one committed INSERT on the same cluster.
func BenchmarkKhalaPostgresCommit(b *testing.B) {
	dsn := pgtest.Database(b)
	conn, err := pgx.Connect(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(b.Context(), "CREATE TABLE floor (n bigint)"); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		for range floorCommits {
			start := time.Now()
			if _, err := conn.Exec(b.Context(), "INSERT INTO floor VALUES ($1)", 1); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.ReportMetric(khPct(lat, 50), "p50-ms/commit")
}

// One thread of 200 sequential turns answered by one agent through one
// server: each turn is claim → response → moderator → next turn queued.
// A simple agent claims after its answer is taken; a nerve daemon claims
// while its answer is on the way (its slot is free once the adapter is
// done), so the answer's commit hands it the next turn.
func BenchmarkKhalaSequentialTurns(b *testing.B) {
	for _, kb := range khBenches {
		for _, agent := range []string{"simple", "daemon"} {
			b.Run(kb.name+"/agent="+agent, func(b *testing.B) {
				_, agents, _ := kb.setup(b, 1, 1)
				a := agents[0]
				respond := func(tk khTurn) {
					a.must(b, "POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "ok"}, 200, nil)
				}
				turns := 0
				for b.Loop() {
					a.must(b, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 200}}, 201, nil)
					tk := khClaim(b, a, 1, "5s")[0]
					for i := range 200 {
						if agent == "simple" {
							respond(tk)
							if i < 199 {
								tk = khClaim(b, a, 1, "5s")[0]
							}
						} else {
							next := make(chan khTurn, 1)
							if i < 199 {
								go func() { next <- khClaim(b, a, 1, "5s")[0] }()
							}
							respond(tk)
							if i < 199 {
								tk = <-next
							}
						}
						turns++
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(turns)/1000, "ms/turn")
			})
		}
	}
}

// Eight agents share 1,000 threads of 4 turns each, on one bbolt server
// or spread over three PostgreSQL replicas. Each agent claims the way a
// nerve daemon with max_concurrent_turns = capacity does: only into free
// slots, and a slot is free again once the turn's answer is in the
// daemon's outbox, so the next claim is under way while the answer is
// delivered (daemon/remote_turn.go). Also reported: each server's peak
// memory, and the database's growth per 10,000 turns.
func BenchmarkKhalaThroughput(b *testing.B) {
	for _, kb := range khBenches {
		for _, capacity := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/capacity=%d", kb.name, capacity), func(b *testing.B) { khThroughput(b, kb, capacity) })
		}
	}
}

func khThroughput(b *testing.B, kb khBench, capacity int) {
	ps, agents, size := kb.setup(b, kb.replicas, 8)
	var turns, creating time.Duration
	total := 0
	size0 := size()
	var serverCPU, dbCPU, agentCPU time.Duration
	for b.Loop() {
		b.StopTimer()
		start := time.Now()
		khParallel(8, 1000, func(w, i int) {
			agents[w].must(b, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 4}}, 201, nil)
		})
		creating += time.Since(start)
		b.StartTimer()
		start = time.Now()
		server0, db0, self0 := khCPU(b, ps), pgtest.ServerCPU(), procCPU(b, os.Getpid())
		var answered atomic.Int64
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				slots := make(chan struct{}, capacity) // a token per free slot
				for range capacity {
					slots <- struct{}{}
				}
				var sending sync.WaitGroup
				defer sending.Wait()
				for answered.Load() < 4000 {
					free := 1
					<-slots
				more:
					for free < capacity {
						select {
						case <-slots:
							free++
						default:
							break more
						}
					}
					turns := khClaim(b, a, free, "100ms")
					for range free - len(turns) {
						slots <- struct{}{}
					}
					for _, tk := range turns {
						sending.Add(1)
						go func() {
							defer sending.Done()
							// The adapter ran and the answer is in the outbox:
							// the slot is free while the answer is delivered.
							slots <- struct{}{}
							a.must(b, "POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "ok"}, 200, nil)
							answered.Add(1)
						}()
					}
				}
			}()
		}
		wg.Wait()
		turns += time.Since(start)
		serverCPU += khCPU(b, ps) - server0
		dbCPU += pgtest.ServerCPU() - db0
		agentCPU += procCPU(b, os.Getpid()) - self0
		total += 4000
	}
	b.ReportMetric(float64(total)/turns.Seconds(), "turns/s")
	b.ReportMetric(float64(b.N*1000)/creating.Seconds(), "threads-created/s")
	var peak float64
	for _, p := range ps {
		peak = max(peak, khRSS(b, p.cmd.Process.Pid, "VmHWM"))
	}
	b.ReportMetric(peak, "peak-rss-MiB/server")
	b.ReportMetric(float64(size()-size0)/float64(total)*10000/(1<<20), "db-MiB/10k-turns")
	// Where the two cores went: the servers' CPU per turn, and the
	// database's (zero on bbolt, where the servers are the database).
	b.ReportMetric(float64(serverCPU.Microseconds())/float64(total)/1000, "server-cpu-ms/turn")
	b.ReportMetric(float64(dbCPU.Microseconds())/float64(total)/1000, "db-cpu-ms/turn")
	b.ReportMetric(float64(agentCPU.Microseconds())/float64(total)/1000, "agents-cpu-ms/turn")
	// How much the replicas' concurrent claims and answers shared
	// statements (a server without these metrics reports none).
	writes, statements := map[string]float64{}, map[string]float64{}
	for _, p := range ps {
		_, data, err := agents[0].at(p).do("GET", "/metrics", nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			var kind string
			var n float64
			if _, err := fmt.Sscanf(line, "khala_pg_writes_total{kind=%q} %g", &kind, &n); err == nil {
				writes[kind] += n
			} else if _, err := fmt.Sscanf(line, "khala_pg_statements_total{kind=%q} %g", &kind, &n); err == nil {
				statements[kind] += n
			}
		}
	}
	for _, kind := range []string{"claim", "answer"} {
		if statements[kind] > 0 {
			b.ReportMetric(writes[kind]/statements[kind], kind+"s/statement")
		}
	}
}

// khCPU is the CPU time the servers have used so far.
func khCPU(b *testing.B, ps []*khProc) time.Duration {
	var d time.Duration
	for _, p := range ps {
		d += procCPU(b, p.cmd.Process.Pid)
	}
	return d
}

// 10,000 open threads with one queued turn each: how long a claim takes
// through one server, and its memory.
func BenchmarkKhalaClaim10kOpenThreads(b *testing.B) {
	for _, kb := range khBenches {
		b.Run(kb.name, func(b *testing.B) { khClaim10k(b, kb) })
	}
}

func khClaim10k(b *testing.B, kb khBench) {
	ps, agents, _ := kb.setup(b, 1, 8)
	p := ps[0]
	khParallel(8, 10000, func(w, i int) {
		agents[w].must(b, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 1}}, 201, nil)
	})
	rssLoaded := khRSS(b, p.cmd.Process.Pid, "VmRSS")
	// A claim whose filter matches nothing walks the whole queue: the worst case.
	var miss []time.Duration
	for range 50 {
		start := time.Now()
		if got := khClaimFiltered(b, agents[0], "nobody"); len(got) != 0 {
			b.Fatal("a filter matching nothing got a turn")
		}
		miss = append(miss, time.Since(start))
	}
	var lat []time.Duration
	for b.Loop() {
		for range 200 { // percentiles of 200 claims, whatever -benchtime says
			start := time.Now()
			if got := khClaim(b, agents[0], 1, "0s"); len(got) != 1 {
				b.Fatal("queue drained: run with a smaller -benchtime")
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.ReportMetric(khPct(lat, 50), "p50-ms")
	b.ReportMetric(khPct(lat, 95), "p95-ms")
	b.ReportMetric(khPct(lat, 99), "p99-ms")
	b.ReportMetric(khPct(miss, 95), "p95-full-scan-ms")
	b.ReportMetric(rssLoaded, "rss-MiB")
	b.ReportMetric(khRSS(b, p.cmd.Process.Pid, "VmHWM"), "peak-rss-MiB")
}

// An idle server's memory.
func BenchmarkKhalaIdleRSS(b *testing.B) {
	for _, kb := range khBenches {
		b.Run(kb.name, func(b *testing.B) {
			ps, _, _ := kb.setup(b, 1, 1)
			time.Sleep(2 * time.Second)
			for b.Loop() {
				time.Sleep(time.Millisecond)
			}
			b.ReportMetric(khRSS(b, ps[0].cmd.Process.Pid, "VmRSS"), "rss-MiB")
		})
	}
}
