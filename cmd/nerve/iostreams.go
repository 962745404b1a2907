package main

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams is where commands read and write. Commands never touch
// os.Stdout directly, so tests can capture output and TTY behaviour is
// decided in one place.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	outTTY bool
}

// System returns the process's own streams.
func System() *IOStreams {
	return &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
		ErrOut: os.Stderr,
		outTTY: term.IsTerminal(int(os.Stdout.Fd())),
	}
}

// TestStreams returns streams backed by buffers: stdout and stderr.
func TestStreams() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, out, errOut
}

// IsTTY reports whether stdout is a terminal, so progress may be redrawn in
// place and long text trimmed.
func (s *IOStreams) IsTTY() bool { return s.outTTY }

// SetTTY overrides TTY detection (tests).
func (s *IOStreams) SetTTY(v bool) { s.outTTY = v }
