package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

type ctxKey struct{}

// The handler is installed at the first wait; a SIGINT then cancels the
// context and its children with signal.NotifyContext's cause.
func TestSignalContextInstallsOnFirstWait(t *testing.T) {
	c := newSignalContext(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer c.stop()
	if c.Value(ctxKey{}) != "v" || c.installed.Load() {
		t.Fatalf("before any wait: value %v, installed %v", c.Value(ctxKey{}), c.installed.Load())
	}
	child, cancel := context.WithCancel(c)
	defer cancel()
	if !c.installed.Load() {
		t.Fatal("a child context waits on its parent: the handler must be installed")
	}
	if c.Err() != nil || c.Value(ctxKey{}) != "v" {
		t.Fatalf("installed: err %v, value %v", c.Err(), c.Value(ctxKey{}))
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not cancel the child context")
	}
	cause := context.Cause(child)
	if !errors.Is(cause, context.Canceled) || cause.Error() != "interrupt signal received" || !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("cause %v, err %v", cause, c.Err())
	}
}

// stop without a wait installs nothing and leaves the context cancelled.
func TestSignalContextStopWithoutWait(t *testing.T) {
	c := newSignalContext(context.Background())
	c.stop()
	if c.installed.Load() {
		t.Fatal("stop installed the handler")
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("stopped context is not done")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("err %v", c.Err())
	}
}
