package workflow

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRouteBoundsOutput: a moderator whose output could not be decoded
// again, or is too large to store and serve whole, fails its thread with
// a reason that names the bound; output inside the bounds passes.
func TestRouteBoundsOutput(t *testing.T) {
	cases := []struct{ mod, want string }{
		// 20,000 deep: past encoding/json's decoding limit.
		{`{"done": true, "result": $reduce([1..20000], function($acc, $i) { {"a": $acc} }, 1)}`, "nested deeper than 64 levels"},
		{`{"done": true, "result": $reduce([1..64], function($acc, $i) { {"b": [$acc]} }, 1)}`, "nested deeper than 64 levels"},
		{`{"done": true, "result": $join([1..140000].("xxxxxxxx"))}`, "returned more than 1024 KiB"},
		{`{"done": true, "result": [1..140000].("xxxxxxxx")}`, "returned more than 1024 KiB"},
		{`{"workflow": "c", "input": {"x": $join([1..140000].("xxxxxxxx"))}}`, "returned more than 1024 KiB"},
		{`{"fail": $join([1..600].("xxxxxxxx"))}`, "fail reason of 4800 bytes, more than 4096"},
		{`{"role": "a", "instruction": $join([1..40000].("xxxxxxxx"))}`, "instruction of 312 KiB, more than 256 KiB"},
	}
	for _, tc := range cases {
		_, err := Route(context.Background(), defWith(t, tc.mod, 0), state(0))
		var re *RoutingError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, tc.want) || len(re.Reason) > 300 {
			t.Errorf("%.60s: got %v, want a routing error saying %q", tc.mod, err, tc.want)
		}
	}
	ok := []string{
		`{"done": true, "result": $reduce([1..60], function($acc, $i) { {"a": $acc} }, 1)}`,
		`{"done": true, "result": $join([1..100000].("xxxxxxxx"))}`,
		`{"fail": $join([1..500].("xxxxxxxx"))}`,
		`{"role": "a", "instruction": $join([1..30000].("xxxxxxxx"))}`,
	}
	for _, mod := range ok {
		if _, err := Route(context.Background(), defWith(t, mod, 0), state(0)); err != nil {
			t.Errorf("%.60s: %v", mod, err)
		}
	}
}

// TestRouteBoundsMemory: a moderator that doubles a string 28 times (256
// MiB at the end, 1 GiB of RSS unbounded) is stopped once the heap has
// grown by maxEvalHeap, well before its timeout, and the heap never grows
// by more than a few times the bound.
func TestRouteBoundsMemory(t *testing.T) {
	mods := []string{
		`{"done": true, "result": $length($reduce([1..28], function($s, $i) { $s & $s }, "x"))}`,
		`($f := function($s, $n) { $n = 0 ? $s : $f($s & $s, $n - 1) }; {"done": true, "result": $length($f("x", 28))})`,
		`{"done": true, "result": $count([1..9999999].([1..9999999]))}`,
	}
	for _, mod := range mods {
		runtime.GC()
		grew, took, err := peakGrowth(func() error {
			_, err := Route(context.Background(), defWith(t, mod, 0), state(0))
			return err
		})
		var re *RoutingError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, "used more than 64 MiB of memory") {
			t.Errorf("%.60s: got %v, want a routing error saying it used too much memory", mod, err)
		}
		t.Logf("%.60s: stopped after %s, the heap grew by at most %d MiB (bound %d MiB)", mod, took, grew>>20, maxEvalHeap>>20)
		if took > moderatorTimeout/2 {
			t.Errorf("%.60s: stopped after %s", mod, took)
		}
		// The bound is checked between steps: a step that doubles a string
		// of 64 MiB is not interrupted.
		if grew > 4*maxEvalHeap {
			t.Errorf("%.60s: heap grew by %d MiB; want at most %d", mod, grew>>20, 4*maxEvalHeap>>20)
		}
	}
}

// peakGrowth runs f and returns how far the heap grew above where it was
// before, at most, and how long f took.
func peakGrowth(f func() error) (int64, time.Duration, error) {
	base := heapBytes()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := heapBytes(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	start := time.Now()
	err := f()
	took := time.Since(start)
	close(stop)
	<-sampled
	return int64(peak.Load()) - int64(base), took, err
}
