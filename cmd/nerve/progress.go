package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// progress shows a thread moving: on a TTY one status line redrawn in
// place (step, role, adapter, elapsed) above a log of finished turns;
// otherwise one plain line per event, for logs and CI.
type progress struct {
	io    *IOStreams
	ref   string
	tty   bool
	start time.Time
	// remote names the remote of a remote thread, whose turns wait in its
	// queue until an agent claims them ("" for a local thread).
	remote string
	// hints are the waits before each reminder that a remote turn is
	// unclaimed, the last repeating.
	hints []time.Duration

	mu      sync.Mutex
	running map[int]workflow.Event // step -> turn.started
	waiting map[int]*time.Timer    // step -> the hint due if nobody claims it
	drawn   bool
	stop    chan struct{}
	done    chan struct{}
}

// unclaimedHints are the waits before progress says, and says again, that
// a remote turn waits unclaimed (no agent seems to serve the queue): at
// 10 s, at a minute, then every 5 minutes, so a run left attached is not
// silent for good after the first hint.
var unclaimedHints = []time.Duration{10 * time.Second, 50 * time.Second, 5 * time.Minute}

// envUnclaimedHints replaces unclaimedHints (durations, comma-separated,
// the last repeating), for tests that cannot wait minutes.
const envUnclaimedHints = "NERVE_UNCLAIMED_HINTS"

// parseHints reads envUnclaimedHints; a value that does not parse, or has
// a wait that is not positive, leaves the default.
func parseHints(s string) []time.Duration {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return unclaimedHints
		}
		out = append(out, d)
	}
	return out
}

func newProgress(io *IOStreams, ref string) *progress {
	p := &progress{io: io, ref: ref, tty: io.IsTTY(), start: time.Now(), hints: unclaimedHints, running: map[int]workflow.Event{},
		waiting: map[int]*time.Timer{}, stop: make(chan struct{}), done: make(chan struct{})}
	if p.tty {
		go p.tick()
	} else {
		close(p.done)
	}
	return p
}

func (p *progress) tick() {
	defer close(p.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.redraw()
			p.mu.Unlock()
		}
	}
}

// Event records one thread event and prints what the user should see.
func (p *progress) Event(e workflow.Event) {
	e = shownEvent(e)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Type {
	case khalaTurnQueued:
		p.expectClaim(e)
	case workflow.EventTurnStarted:
		p.claimed(e.Step)
		p.running[e.Step] = e
		if !p.tty {
			p.line("step %d  %s  started (%s)", e.Step, e.Role, doer(e))
		}
	case khalaTurnExpired, khalaTurnReleased:
		delete(p.running, e.Step)
		p.line("step %d  %s  %s", e.Step, e.Role, requeued(e))
		if e.Message == "" {
			p.expectClaim(e)
		}
	case workflow.EventTurnAnswered, workflow.EventTurnFailed:
		started, ok := p.running[e.Step]
		delete(p.running, e.Step)
		took := ""
		if ok {
			took = " in " + fmtDuration(e.At.Sub(started.At))
		}
		if e.Type == workflow.EventTurnFailed {
			p.line("step %d  %s  failed%s: %s", e.Step, e.Role, took, e.Message)
		} else {
			p.line("step %d  %s  answered%s (%s)", e.Step, e.Role, took, doer(e))
		}
	case workflow.EventDetection:
		p.line("step %d  %s  detection %s: %s", e.Step, e.Role, e.Status, e.Message)
	case workflow.EventTurnWaiting:
		p.claimed(e.Step)
		p.line("step %d  %s  %s; answer with: %s", e.Step, e.Role, e.Message, answerCommand(p.ref, nil, false))
	case workflow.EventChildStarted:
		p.line("step %d  started child %s", e.Step, e.Message)
	case workflow.EventResumed:
		p.line("%s %s", p.ref, e.Message)
	case api.EventNotify:
		p.line("%s", notifyLine(e))
	}
	if p.tty {
		p.redraw()
	}
}

// Khala's events of a remote thread's queue (khala/engine.go), as the
// remote sends them.
const (
	khalaTurnQueued   = "turn.queued"
	khalaTurnExpired  = "turn.expired"
	khalaTurnReleased = "turn.released"
	khalaTurnIdle     = "turn.idle"
)

// requeued says what became of a turn whose agent lost or gave it back:
// queued again, or (past max_attempts) the end of its thread.
func requeued(e workflow.Event) string {
	switch {
	case e.Message != "":
		return e.Message
	case e.Type == khalaTurnReleased:
		return fmt.Sprintf("given back by %s; queued again", e.Agent)
	}
	return fmt.Sprintf("the lease of %s ran out; queued again", e.Agent)
}

// doer says who runs a turn: its adapter here, its agent on a remote.
func doer(e workflow.Event) string {
	if e.Adapter != "" {
		return e.Adapter
	}
	return e.Agent
}

// expectClaim arms the hints for a remote turn that waits in the queue:
// a thread nobody serves would otherwise just sit there.
func (p *progress) expectClaim(e workflow.Event) {
	if p.remote == "" {
		return
	}
	p.claimed(e.Step)
	p.remind(e, 0, 0)
}

// remind arms the n-th reminder that e's step waits unclaimed, after it
// has waited so far. It runs with p.mu held, so the timer is stored before
// its function can look for it.
func (p *progress) remind(e workflow.Event, n int, waited time.Duration) {
	gap := p.hints[min(n, len(p.hints)-1)]
	waited += gap
	var t *time.Timer
	t = time.AfterFunc(gap, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.waiting[e.Step] != t {
			return // claimed, or armed again since
		}
		if n == 0 {
			p.line("step %d  %s  waiting %s for an agent to claim it; agents serve %s with a running daemon whose nerve.yaml has a khala sense of it and a do: turn reflex",
				e.Step, e.Role, fmtDuration(waited), p.remote)
		} else {
			p.line("step %d  %s  still unclaimed after %s; no agent serves %s", e.Step, e.Role, fmtDuration(waited), p.remote)
		}
		p.remind(e, n+1, waited)
		if p.tty {
			p.redraw()
		}
	})
	p.waiting[e.Step] = t
}

// claimed disarms step's hint.
func (p *progress) claimed(step int) {
	if t, ok := p.waiting[step]; ok {
		t.Stop()
		delete(p.waiting, step)
	}
}

// line prints a permanent line, above the status line on a TTY.
func (p *progress) line(format string, a ...any) {
	if p.tty && p.drawn {
		fmt.Fprint(p.io.ErrOut, "\r\033[K")
		p.drawn = false
	}
	fmt.Fprintf(p.io.ErrOut, format+"\n", a...)
}

func (p *progress) redraw() {
	if len(p.running) == 0 {
		if p.drawn {
			fmt.Fprint(p.io.ErrOut, "\r\033[K")
			p.drawn = false
		}
		return
	}
	steps := make([]int, 0, len(p.running))
	for s := range p.running {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	parts := make([]string, 0, len(steps))
	for _, s := range steps {
		e := p.running[s]
		parts = append(parts, fmt.Sprintf("step %d %s (%s) %s", s, e.Role, doer(e), fmtDuration(time.Since(e.At))))
	}
	spin := `|/-\`[int(time.Since(p.start)/(100*time.Millisecond))%4]
	fmt.Fprintf(p.io.ErrOut, "\r\033[K%c %s  %s", spin, p.ref, strings.Join(parts, " · "))
	p.drawn = true
}

// Close stops redrawing and clears the status line.
func (p *progress) Close() {
	p.mu.Lock()
	for step := range p.waiting {
		p.claimed(step)
	}
	p.mu.Unlock()
	if p.tty {
		close(p.stop)
		<-p.done
		p.mu.Lock()
		p.running = map[int]workflow.Event{}
		p.redraw()
		p.mu.Unlock()
	}
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}
