package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

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

	mu      sync.Mutex
	running map[int]workflow.Event // step -> turn.started
	drawn   bool
	stop    chan struct{}
	done    chan struct{}
}

func newProgress(io *IOStreams, ref string) *progress {
	p := &progress{io: io, ref: ref, tty: io.IsTTY(), start: time.Now(), running: map[int]workflow.Event{},
		stop: make(chan struct{}), done: make(chan struct{})}
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
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Type {
	case workflow.EventTurnStarted:
		p.running[e.Step] = e
		if !p.tty {
			p.line("step %d  %s  started (%s)", e.Step, e.Role, e.Adapter)
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
			p.line("step %d  %s  answered%s (%s)", e.Step, e.Role, took, e.Adapter)
		}
	case workflow.EventDetection:
		p.line("step %d  %s  detection %s: %s", e.Step, e.Role, e.Status, e.Message)
	case workflow.EventResumed:
		p.line("%s %s", p.ref, e.Message)
	}
	if p.tty {
		p.redraw()
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
		parts = append(parts, fmt.Sprintf("step %d %s (%s) %s", s, e.Role, e.Adapter, fmtDuration(time.Since(e.At))))
	}
	spin := `|/-\`[int(time.Since(p.start)/(100*time.Millisecond))%4]
	fmt.Fprintf(p.io.ErrOut, "\r\033[K%c %s  %s", spin, p.ref, strings.Join(parts, " · "))
	p.drawn = true
}

// Close stops redrawing and clears the status line.
func (p *progress) Close() {
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
