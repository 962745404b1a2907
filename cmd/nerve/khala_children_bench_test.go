package main

import (
	"testing"
	"time"
)

// Starting a child thread against starting a top-level one, in the same
// run against a real `nerve khala serve` (one server per backend): a
// child's start also records it in its parent (one more commit). The
// two kinds alternate, so both see the same database:
//
//	go test ./cmd/nerve -run '^$' -bench KhalaStartChild
func BenchmarkKhalaStartChild(b *testing.B) {
	for _, kb := range khBenches {
		b.Run(kb.name, func(b *testing.B) { khStartChild(b, kb) })
	}
}

// childrenPerParent bounds a parent's children in the benchmark, as a
// real fan-out's are: a parent keeps its children's links.
const childrenPerParent = 50

func khStartChild(b *testing.B, kb khBench) {
	_, agents, _ := kb.setup(b, 1, 1)
	a := agents[0]
	start := func(body map[string]any) (string, time.Duration) {
		var out struct {
			Thread string `json:"thread"`
		}
		t0 := time.Now()
		a.must(b, "POST", "/v1/workflows/relay/threads", body, 201, &out)
		return out.Thread, time.Since(t0)
	}
	input := map[string]any{"turns": 4}
	parent, _ := start(map[string]any{"input": input})
	var top, child []time.Duration
	n := 0
	for b.Loop() {
		for range 100 {
			if n++; n%childrenPerParent == 0 {
				parent, _ = start(map[string]any{"input": input})
			}
			_, d := start(map[string]any{"input": input})
			top = append(top, d)
			_, d = start(map[string]any{"input": input, "parent": map[string]any{"thread": parent}})
			child = append(child, d)
		}
	}
	b.ReportMetric(khPct(top, 50), "p50-ms/top-level")
	b.ReportMetric(khPct(child, 50), "p50-ms/child")
	b.ReportMetric(khPct(child, 50)-khPct(top, 50), "p50-ms-more/child")
	b.ReportMetric(khPct(child, 95)-khPct(top, 95), "p95-ms-more/child")
}
