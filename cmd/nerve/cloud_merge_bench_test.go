package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCloudMergeHandover measures what a parallel round of a cloud
// thread with a workspace costs at its end, beside a single turn's
// handover, with the real nerve binary, a real Khala, two daemons and a
// bare git repository on disk. Each thread runs two turns in parallel
// (one per daemon, each writing its own file), then two single turns.
// Reported, as means over the threads:
//
//   - merge-queued-ms: the round's last answer to the next turn queued (the
//     merge turn claimed, git merge and push on a daemon's mirror, its
//     answer recorded and routed);
//   - merge-started-ms: the round's last answer to the next turn claimed;
//   - merge-run-ms: the merge turn claimed to its answer recorded (the
//     daemon's part: fetch, merge, push, answer);
//   - single-started-ms: a single turn's answer to the next turn claimed
//     (the baseline: that turn is queued in the answer's own commit).
func BenchmarkCloudMergeHandover(b *testing.B) {
	seed := gitRepo(b)
	base := git(b, seed, "rev-parse", "HEAD")
	shared := filepath.Join(b.TempDir(), "shared.git")
	git(b, seed, "clone", "-q", "--bare", seed, shared)
	k := startKhala(b)
	tok := k.enrollToken(b, 2)
	a := agentEnv(b, k, tok, "agent-a", mergeScript, ", roles: [left, next]", 2)
	c := agentEnv(b, k, tok, "agent-b", mergeScript, ", roles: [right]", 2)
	a.must(0, "workflow", "push", a.write("split4.yaml", fmt.Sprintf(`workflow: split4
binding: cloud
workspace: {repo: %s}
moderator: |
  $count(messages) = 0 ? [{"role": "left", "instruction": "go"}, {"role": "right", "instruction": "go"}]
  : $count(messages) < 4 ? {"role": "next", "instruction": "look"} : {"done": true}
roles:
  left: {adapter: fake, prompt: p}
  right: {adapter: fake, prompt: p}
  next: {adapter: fake, prompt: p}
`, shared)), "origin")
	a.must(0, "daemon", "start")
	c.must(0, "daemon", "start")
	const mergeStep = 1<<30 + 2 // khaladb.MergeStepBase + the round's last step
	var queued, started, run, single time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := wsxStart(b, k, a, "split4", shared, base)
		msgs, evs, _ := followThread(b, k, a, "split4", id)
		if len(msgs) != 4 || msgs[1].Error != nil {
			b.Fatalf("messages: %+v", msgs)
		}
		at := func(typ string, step int) time.Time {
			var t time.Time
			for _, ev := range evs {
				if ev.Type == typ && ev.Step == step {
					t = ev.At
				}
			}
			return t
		}
		last := at("turn.answered", 1)
		if t := at("turn.answered", 2); t.After(last) {
			last = t
		}
		queued += at("turn.queued", 3).Sub(last)
		started += at("turn.started", 3).Sub(last)
		run += at("turn.answered", mergeStep).Sub(at("turn.started", mergeStep))
		single += at("turn.started", 4).Sub(at("turn.answered", 3))
	}
	n := float64(b.N)
	if run <= 0 {
		b.Fatal("no merge turn in the traces")
	}
	b.ReportMetric(float64(queued.Microseconds())/1000/n, "merge-queued-ms")
	b.ReportMetric(float64(started.Microseconds())/1000/n, "merge-started-ms")
	b.ReportMetric(float64(run.Microseconds())/1000/n, "merge-run-ms")
	b.ReportMetric(float64(single.Microseconds())/1000/n, "single-started-ms")
}
