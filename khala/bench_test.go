package khala

import "testing"

// The figures DESIGN.md asks for are measured against the real binary in
// cmd/nerve (BenchmarkKhala*); this in-process one is for profiling, on
// each backend:
//
//	go test ./khala -run '^$' -bench Sequential/postgres -cpuprofile cpu.out
func BenchmarkSequentialTurnsInProcess(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) { benchSequential(b, bk) })
	}
}

func benchSequential(b *testing.B, bk backend) {
	ts := bk.server(b)
	a := ts.agent("a")
	a.putWorkflow(`workflow: relay
binding: cloud
moderator: '$count(messages) >= input.turns ? {"done": true} : {"role": "worker", "instruction": "step " & ($count(messages) + 1)}'
inputs:
  turns: {type: integer, default: 4}
roles:
  worker: {prompt: You relay.}
limits:
  max_steps: 100000
`)
	turns := 0
	for b.Loop() {
		a.start("relay", map[string]any{"turns": 200}, "")
		for range 200 {
			tk := a.claimOne()
			if s, d := a.respond(tk, "ok", nil); s != 200 {
				b.Fatalf("%d %s", s, d)
			}
			turns++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(turns)/1000, "ms/turn")
}
