package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

// BenchmarkKhalaFleet is a fleet on one Khala: agents (default 1,000),
// each its own HTTP client, each holding one leased turn it heartbeats
// every third of the lease, and each long-polling for one more; new
// threads arrive meanwhile, and some agents die (stop heartbeating).
// Time is scaled: the lease is NERVE_FLEET_LEASE (default 3s, for a 30s
// lease heartbeated every 10s). Reported per deployment (bbolt; three
// PostgreSQL replicas): the servers' CPU (their processes' user+system
// time, read from /proc) and memory; the database's writes (bbolt: bytes
// the server wrote to disk; PostgreSQL: pg_stat_database and WAL
// deltas); how many times a turn's stored lease moved per lease period
// (heartbeat answers whose lease_expires_at changed); pickup latency of
// the new threads' turns (from the start of the request that creates the
// thread to the claim's answer at an agent); and the time from a dead
// agent's last heartbeat to its turn's claim by another agent.
//
//	go test ./cmd/nerve -run '^$' -bench KhalaFleet -benchtime 1x
//
// NERVE_BENCH_KHALA_BIN runs another nerve binary as the server (a
// baseline built from main).
func BenchmarkKhalaFleet(b *testing.B) {
	for _, kb := range khBenches {
		b.Run(kb.name, func(b *testing.B) { khFleet(b, kb) })
	}
}

// khServerBin is the nerve binary the Khala benchmarks serve with.
func khServerBin(tb testing.TB) string {
	if bin := os.Getenv("NERVE_BENCH_KHALA_BIN"); bin != "" {
		return bin
	}
	return nerveBin(tb)
}

func khFleetEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

const khFleetWF = `workflow: fleet
binding: cloud
moderator: '$count(messages) >= 1 ? {"done": true} : {"role": "worker", "instruction": "hold"}'
roles:
  worker: {prompt: You hold.}
limits:
  claim: %s
  max_attempts: 100
`

// khFleetRun is one fleet's shared record.
type khFleetRun struct {
	mu       sync.Mutex
	created  map[string]time.Time // new thread -> its create request's start
	got      map[string]time.Time // thread -> when an agent's claim got its turn
	lastBeat map[string]time.Time // a dead agent's thread -> its last heartbeat
	creates  []time.Duration      // how long each create request took
	beats    atomic.Int64
	moved    atomic.Int64 // heartbeat answers whose expiry changed
	errs     atomic.Int64
}

func (r *khFleetRun) record(m map[string]time.Time, k string, t time.Time) {
	r.mu.Lock()
	m[k] = t
	r.mu.Unlock()
}

func khFleet(b *testing.B, kb khBench) {
	n := khFleetEnv("NERVE_FLEET_AGENTS", 1000)
	lease := time.Duration(khFleetEnv("NERVE_FLEET_LEASE_MS", 3000)) * time.Millisecond
	window := time.Duration(khFleetEnv("NERVE_FLEET_WINDOW_MS", 15000)) * time.Millisecond
	rate := khFleetEnv("NERVE_FLEET_RATE", 20) // new threads a second
	dead := max(n/50, 1)
	ps, agents, dsn := khFleetSetup(b, kb, n)
	agents[0].must(b, "PUT", "/v1/workflows/fleet", map[string]string{"source": fmt.Sprintf(khFleetWF, lease)}, 201, nil)
	for b.Loop() {
		run := &khFleetRun{created: map[string]time.Time{}, got: map[string]time.Time{}, lastBeat: map[string]time.Time{}}
		// Every agent takes one turn to hold.
		held := make([]khTurn, n)
		khParallel(16, n, func(w, i int) {
			agents[i%len(agents)].must(b, "POST", "/v1/workflows/fleet/threads", map[string]any{"input": map[string]any{}}, 201, nil)
		})
		khParallel(16, n, func(w, i int) {
			for range 10 {
				if got := khClaim(b, agents[i], 1, "5s"); len(got) == 1 {
					held[i] = got[0]
					return
				}
			}
			b.Errorf("agent %d got no turn to hold", i)
		})
		time.Sleep(lease / 3) // every heartbeat loop under way before the window
		ctx, stop := context.WithTimeout(b.Context(), window)
		var wg sync.WaitGroup
		for i, a := range agents {
			wg.Add(2)
			go func() { defer wg.Done(); khFleetHold(ctx, run, a, held[i], lease, i < dead, window/5, i, n) }()
			go func() { defer wg.Done(); khFleetPoll(ctx, run, a, i < dead) }()
		}
		io0, cpu0, db0, pg0 := khFleetWrites(ps), khCPU(b, ps), pgtest.ServerCPU(), khFleetPG(b, dsn)
		start := time.Now()
		wg.Add(1)
		go func() { defer wg.Done(); khFleetCreate(ctx, run, agents, rate, window-2*lease-lease/2) }()
		<-ctx.Done()
		elapsed := time.Since(start)
		io1, cpu1, db1, pg1 := khFleetWrites(ps), khCPU(b, ps), pgtest.ServerCPU(), khFleetPG(b, dsn)
		stop()
		wg.Wait()
		khFleetReport(b, kb, run, ps, elapsed, lease, n, dead, cpu1-cpu0, db1-db0, io1-io0, pg0, pg1)
	}
}

func khFleetSetup(b *testing.B, kb khBench, n int) ([]*khProc, []*khClient, string) {
	if kb.name == "bolt" {
		p, agents, _ := khSetup(b, n)
		return []*khProc{p}, agents, ""
	}
	dsn := khPGDatabase(b)
	ps, enroll := khReplicas(b, dsn, kb.replicas, n)
	return ps, khAgents(b, ps, enroll, "agent", n), dsn
}

// khFleetHold heartbeats t every third of the lease (from a random
// phase); a dying agent stops after dieAfter and records its last beat.
func khFleetHold(ctx context.Context, run *khFleetRun, a *khClient, t khTurn, lease time.Duration, dies bool, dieAfter time.Duration, i, n int) {
	every := lease / 3
	tick := time.NewTimer(every * time.Duration(i) / time.Duration(n))
	defer tick.Stop()
	begin := time.Now()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if dies && time.Since(begin) > dieAfter {
			return
		}
		status, data, err := a.do("POST", "/v1/turns/"+t.Turn+"/heartbeat", map[string]string{"claim": t.Claim})
		if ctx.Err() != nil {
			return
		}
		if err != nil || status != 200 {
			run.errs.Add(1)
			return
		}
		run.beats.Add(1)
		var out struct {
			Expires string `json:"lease_expires_at"`
		}
		_ = json.Unmarshal(data, &out)
		if out.Expires != last {
			if last != "" {
				run.moved.Add(1)
			}
			last = out.Expires
		}
		if dies {
			run.record(run.lastBeat, t.Thread, time.Now())
		}
		tick.Reset(every)
	}
}

// khFleetPoll long-polls for turns and answers each at once; a dying
// agent does not poll.
func khFleetPoll(ctx context.Context, run *khFleetRun, a *khClient, dies bool) {
	for !dies && ctx.Err() == nil {
		var got []khTurn
		status, data, err := a.doCtx(ctx, "POST", "/v1/turns/claim", map[string]any{"max": 1, "wait": "30s"})
		at := time.Now()
		if ctx.Err() != nil {
			return
		}
		if err != nil || status != 200 || json.Unmarshal(data, &got) != nil {
			run.errs.Add(1)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, t := range got {
			run.record(run.got, t.Thread, at)
			a.do("POST", "/v1/turns/"+t.Turn+"/response", map[string]any{"claim": t.Claim, "content": "ok"})
		}
	}
}

// khFleetCreate starts rate threads a second for span (bounded).
func khFleetCreate(ctx context.Context, run *khFleetRun, agents []*khClient, rate int, span time.Duration) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(span)
	for i := 0; time.Now().Before(end) && i < rate*int(span/time.Second+1); i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := time.Now()
		var out struct{ Thread string }
		status, data, err := agents[i%len(agents)].do("POST", "/v1/workflows/fleet/threads", map[string]any{"input": map[string]any{}})
		if err != nil || status != 201 || json.Unmarshal(data, &out) != nil {
			run.errs.Add(1)
			continue
		}
		run.record(run.created, out.Thread, start)
		run.mu.Lock()
		run.creates = append(run.creates, time.Since(start))
		run.mu.Unlock()
	}
}

// khFleetWrites is the bytes the servers have had written to disk.
func khFleetWrites(ps []*khProc) int64 {
	var total int64
	for _, p := range ps {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid))
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}

// khFleetPG reads the database's commit, update and WAL counters (zeros
// without a dsn).
func khFleetPG(b *testing.B, dsn string) [3]int64 {
	var out [3]int64
	if dsn == "" {
		return out
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(context.Background(), `SELECT xact_commit, tup_updated, pg_current_wal_lsn() - '0/0'
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&out[0], &out[1], &out[2])
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func khFleetReport(b *testing.B, kb khBench, run *khFleetRun, ps []*khProc, elapsed, lease time.Duration, n, dead int,
	cpu, dbCPU time.Duration, written int64, pg0, pg1 [3]int64) {
	secs := elapsed.Seconds()
	var pickup, reclaim []time.Duration
	run.mu.Lock()
	for th, t0 := range run.created {
		if at, ok := run.got[th]; ok {
			pickup = append(pickup, at.Sub(t0))
		}
	}
	for th, beat := range run.lastBeat {
		if at, ok := run.got[th]; ok {
			reclaim = append(reclaim, at.Sub(beat))
		}
	}
	created, lost := len(run.created), len(run.lastBeat)
	run.mu.Unlock()
	if len(pickup) < created || len(reclaim) < lost {
		b.Logf("%d of %d new threads picked up, %d of %d dead agents' turns re-claimed in the window",
			len(pickup), created, len(reclaim), lost)
	}
	b.ReportMetric(100*cpu.Seconds()/secs, "server-cpu-%core")
	b.ReportMetric(100*dbCPU.Seconds()/secs, "db-cpu-%core")
	var rss, peak float64
	for _, p := range ps {
		rss = max(rss, khRSS(b, p.cmd.Process.Pid, "VmRSS"))
		peak = max(peak, khRSS(b, p.cmd.Process.Pid, "VmHWM"))
	}
	b.ReportMetric(rss, "rss-MiB/server")
	b.ReportMetric(peak, "peak-rss-MiB/server")
	b.ReportMetric(float64(run.beats.Load())/secs, "heartbeats/s")
	b.ReportMetric(float64(run.moved.Load())/float64(n-dead)/(secs/lease.Seconds()), "lease-writes/turn/lease")
	b.ReportMetric(float64(run.errs.Load()), "errors")
	if kb.name == "bolt" {
		b.ReportMetric(float64(written)/secs/1024, "disk-write-KiB/s")
	} else {
		b.ReportMetric(float64(pg1[0]-pg0[0])/secs, "pg-xact-commit/s")
		b.ReportMetric(float64(pg1[1]-pg0[1])/secs, "pg-tup-updated/s")
		b.ReportMetric(float64(pg1[2]-pg0[2])/secs/1024, "pg-wal-KiB/s")
	}
	b.ReportMetric(khPct(pickup, 50), "pickup-p50-ms")
	b.ReportMetric(khPct(pickup, 99), "pickup-p99-ms")
	b.ReportMetric(float64(len(pickup)), "new-turns")
	b.ReportMetric(khPct(run.creates, 99), "create-p99-ms")
	b.ReportMetric(khPct(reclaim, 50)/1000/lease.Seconds(), "reclaim-p50-leases")
	b.ReportMetric(khPct(reclaim, 100)/1000/lease.Seconds(), "reclaim-max-leases")
	b.ReportMetric(float64(len(reclaim)), "reclaimed")
}
