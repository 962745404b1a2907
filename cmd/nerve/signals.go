package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// signalContext is the commands' context: SIGINT or SIGTERM cancels it,
// as signal.NotifyContext does. The handler is installed when the context
// is first waited on or asked (Done, Err), not at start: installing it
// starts os/signal's goroutines, one locked to a thread of its own, which
// made `nerve version` and `nerve thread messages` inside a turn (neither
// waits on anything) start six threads instead of three, 2-3% of their
// run. Until then a signal has its default effect and ends the process at
// once, which is what Ctrl-C should do to a command that has not waited
// on anything yet.
type signalContext struct {
	context.Context // the parent: Deadline, and Value until installed

	once      sync.Once
	installed atomic.Bool
	ctx       context.Context
	cancel    context.CancelFunc
}

func newSignalContext(parent context.Context) *signalContext {
	return &signalContext{Context: parent}
}

func (c *signalContext) install() {
	c.once.Do(func() {
		c.ctx, c.cancel = signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		c.installed.Store(true)
	})
}

func (c *signalContext) Done() <-chan struct{} { c.install(); return c.ctx.Done() }

func (c *signalContext) Err() error { c.install(); return c.ctx.Err() }

// Value answers from the signal context once it is installed, so that a
// child context (context.WithCancel) is cancelled with its cause.
func (c *signalContext) Value(key any) any {
	if c.installed.Load() {
		return c.ctx.Value(key)
	}
	return c.Context.Value(key)
}

// stop cancels the context and removes the handler, if it was installed.
func (c *signalContext) stop() {
	c.once.Do(func() {
		c.ctx, c.cancel = context.WithCancel(c.Context)
	})
	c.cancel()
}
