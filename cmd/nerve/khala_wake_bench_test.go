package main

import (
	"os"
	"testing"
	"time"
)

// A long poll parked on one PostgreSQL replica, woken by a turn queued
// through another: the time from the creating request's answer (the turn
// is committed) to the claim's answer, p50 of many. Beside it, the same
// with both on one replica (woken in process, no NOTIFY):
//
//	go test ./cmd/nerve -run '^$' -bench KhalaWake -benchtime 200x
func BenchmarkKhalaWake(b *testing.B) {
	for _, across := range []bool{false, true} {
		name := "same-replica"
		if across {
			name = "across-replicas"
		}
		b.Run(name, func(b *testing.B) {
			dsn := khPGDatabase(b)
			ps, enroll := khReplicas(b, dsn, 3, 2)
			agents := khAgents(b, ps, enroll, "agent", 2) // agent 0 on replica 0, agent 1 on replica 1
			creator, poller := agents[0], agents[1].at(ps[0])
			if across {
				poller = agents[1]
			}
			creator.must(b, "PUT", "/v1/workflows/relay", map[string]string{"source": khRelayWF}, 201, nil)
			var fromCommit, fromRequest []time.Duration
			for b.Loop() {
				claimed := make(chan khTurn, 1)
				go func() {
					tk := khClaim(b, poller, 1, "10s")
					claimed <- tk[0]
				}()
				time.Sleep(khPark) // the poll is parked
				sent := time.Now()
				creator.must(b, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 1}}, 201, nil)
				queued := time.Now()
				tk := <-claimed
				got := time.Now()
				fromCommit = append(fromCommit, got.Sub(queued))
				fromRequest = append(fromRequest, got.Sub(sent))
				poller.must(b, "POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "ok"}, 200, nil)
			}
			b.ReportMetric(khPct(fromCommit, 50), "p50-ms-after-queued")
			b.ReportMetric(khPct(fromCommit, 95), "p95-ms-after-queued")
			b.ReportMetric(khPct(fromRequest, 50), "p50-ms-after-create-sent")
			b.ReportMetric(float64(fromCommit[0].Microseconds())/1000, "first-ms-after-queued")
		})
	}
}

// khPark is how long a poll is parked before the turn is queued (PARK=700ms
// to see a poll that has waited a while; at least 20ms).
var khPark = func() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("PARK"))
	return max(d, 20*time.Millisecond)
}()
