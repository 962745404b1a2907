package workflow

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"sync"
	"time"
)

// What a moderator may produce, and the memory its evaluation may take. A
// moderator is written by whoever publishes a workflow, and on a Khala
// what it returns is stored in a thread record every caller lists: an
// output too deep to decode again, or too large to serve, would break
// those reads for everyone, and an evaluation that grows without bound
// takes the server's memory. The bounds are far above what routing needs
// (a decision is a role, an instruction and a small result), so a
// moderator that reaches one is broken or hostile, and its thread fails.
const (
	// maxOutputDepth bounds the nesting of the output: Go's encoding/json
	// refuses to decode beyond 10000, and no result needs more than a few.
	maxOutputDepth = 64
	// maxOutputBytes bounds the whole output (a result, a child's input),
	// measured as its JSON would be: it is stored and served whole.
	maxOutputBytes = 1 << 20
	// maxInstructionBytes bounds one turn's instruction: it becomes part
	// of an agent's prompt, whose context is far smaller than this.
	maxInstructionBytes = 256 << 10
	// maxFailBytes bounds a fail reason: it is one line in a listing.
	maxFailBytes = 4 << 10
	// maxEvalHeap bounds how far the heap may grow while one evaluation
	// runs (see evalWatch).
	maxEvalHeap = 64 << 20
)

// errEvalMemory is what an evaluation fails with when the heap grew past
// maxEvalHeap while it ran.
var errEvalMemory = fmt.Errorf("used more than %d MiB of memory", maxEvalHeap>>20)

// heapMetric is the bytes of heap objects, live or not yet swept: what an
// evaluation's strings and arrays add to as they are built. It is read
// without stopping the world (unlike runtime.ReadMemStats), in about
// 400ns.
const heapMetric = "/memory/classes/heap/objects:bytes"

var heapSamples = sync.Pool{New: func() any { return &[1]metrics.Sample{{Name: heapMetric}} }}

func heapBytes() uint64 {
	s := heapSamples.Get().(*[1]metrics.Sample)
	metrics.Read(s[:])
	n := s[0].Value.Uint64()
	heapSamples.Put(s)
	return n
}

// evalWatch is the context a moderator is evaluated with: gnata has no
// memory limit, but it asks its context's Err before every node and every
// call, so Err is where the heap is watched, on the evaluating goroutine
// itself (a watchdog goroutine is not scheduled in time on a busy
// machine). Reading the heap every time would cost more than the
// evaluation, so every heapEvery calls Err reads the clock, and the heap
// when heapGap has passed since it last did: a moderator that doubles a
// string is stopped within a doubling or two of the bound (a doubling
// of megabytes takes far longer than heapGap, and makes several calls).
// The heap is the process's, not the evaluation's (Go has no
// per-goroutine figure): an evaluation that runs beside a large
// allocation elsewhere may be stopped too, which the bound being far above
// any moderator's need makes rare.
//
// One evaluation runs on one goroutine (gnata starts none), so the
// counters need no lock.
type evalWatch struct {
	context.Context
	calls uint32
	// last is when Err last read the heap (0: never, then the clock
	// itself, since epoch); base is the lowest heap seen (0: not read).
	last time.Duration
	base uint64
	over bool
}

const (
	heapEvery = 8
	heapGap   = 50 * time.Microsecond
)

// epoch is what the watch's clock counts from: time.Since of a fixed time
// is the cheapest monotonic reading.
var epoch = time.Now()

func newEvalWatch(parent context.Context) *evalWatch { return &evalWatch{Context: parent} }

// Err is the parent's, or errEvalMemory once the heap has grown by more
// than maxEvalHeap since the watch first read it. That first reading is
// taken heapGap into the evaluation, not at its start: most evaluations
// are over before then, and pay no reading at all; what an evaluation
// allocates in its first heapGap is no more than a few megabytes.
func (w *evalWatch) Err() error {
	if w.over {
		return errEvalMemory
	}
	if err := w.Context.Err(); err != nil {
		return err
	}
	if w.calls++; w.calls%heapEvery != 0 {
		return nil
	}
	now := time.Since(epoch)
	switch {
	case w.last == 0:
		w.last = now
		return nil
	case now-w.last < heapGap:
		return nil
	}
	w.last = now
	// The base is the lowest heap seen: garbage from before the
	// evaluation, swept while it runs, must not hide what it adds.
	switch n := heapBytes(); {
	case w.base == 0 || n < w.base:
		w.base = n
	case n-w.base > maxEvalHeap:
		w.over = true
		return errEvalMemory
	}
	return nil
}

// checkOutput reports, as a reason the thread fails with, an output that
// is nested deeper than maxOutputDepth or larger than maxOutputBytes. It
// stops at the first bound crossed, so a huge output costs no more than
// the bound to check.
func checkOutput(out any) string {
	size := 0
	switch outputSize(out, 1, &size) {
	case errDepth:
		return fmt.Sprintf("returned output nested deeper than %d levels", maxOutputDepth)
	case errSize:
		return fmt.Sprintf("returned more than %d KiB (a moderator's output is bounded at %d KiB: it is stored and served whole)", maxOutputBytes>>10, maxOutputBytes>>10)
	}
	return ""
}

var errDepth, errSize = errors.New("depth"), errors.New("size")

// outputSize adds to size about what v takes as JSON, and stops with
// errDepth or errSize at the first bound v crosses.
func outputSize(v any, depth int, size *int) error {
	if depth > maxOutputDepth {
		return errDepth
	}
	switch x := v.(type) {
	case string:
		*size += len(x) + 2
	case map[string]any:
		*size += 2
		for k, e := range x {
			*size += len(k) + 4
			if err := outputSize(e, depth+1, size); err != nil {
				return err
			}
		}
	case []any:
		*size += 2
		for _, e := range x {
			*size++
			if err := outputSize(e, depth+1, size); err != nil {
				return err
			}
		}
	default: // numbers, booleans, null
		*size += 8
	}
	if *size > maxOutputBytes {
		return errSize
	}
	return nil
}

// bounded cuts s to at most n bytes, on a character boundary, for a reason
// that quotes what a moderator produced.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - 3
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "..."
}
