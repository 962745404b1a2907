package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// A long help wrapped by hand is printed as written: a line that runs on
// far past its neighbours (console's ran to 150 columns) shows ragged in
// a terminal.
func TestLongHelpIsWrapped(t *testing.T) {
	const widest = 120
	io, _, _ := TestStreams()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if lines := strings.Split(c.Long, "\n"); len(lines) > 1 {
			for _, line := range lines {
				if n := utf8.RuneCountInString(line); n > widest {
					t.Errorf("%s: a line of its help is %d columns, more than %d:\n%s", c.CommandPath(), n, widest, line)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newCmdRoot(newFactory(io)))
}
