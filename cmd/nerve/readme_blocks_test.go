package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// readmeBlock is one fenced block of README.md: its language ("" for a
// bare fence) and its lines.
type readmeBlock struct {
	lang  string
	lines []string
}

// readmeSections reads README.md into its sections, each the blocks
// between a heading (any level, outside a fence) and the next, keyed by
// the heading's text.
func readmeSections(t *testing.T) map[string][]readmeBlock {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]readmeBlock{}
	var section string
	var block *readmeBlock
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case block != nil && strings.HasPrefix(line, "```"):
			sections[section] = append(sections[section], *block)
			block = nil
		case block != nil:
			block.lines = append(block.lines, line)
		case strings.HasPrefix(line, "```"):
			block = &readmeBlock{lang: strings.TrimPrefix(line, "```")}
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if block != nil {
		t.Fatalf("README.md: a fence in %q is never closed", section)
	}
	return sections
}

// readmeCmd is one command line of a shell block: the command as sh reads
// it and the comment after it.
type readmeCmd struct {
	line, cmd, comment string
}

// commentStart is where sh starts a comment: a # at the start or after a
// blank (code-review#thread-2 is a word, not a comment). The README's
// commands quote no #.
var commentStart = regexp.MustCompile(`(^|\s)#`)

// shellCommands splits a shell block into its commands, joining lines
// continued with a backslash and leaving out blank and comment-only lines.
func shellCommands(b readmeBlock) []readmeCmd {
	var cmds []readmeCmd
	pending := ""
	for _, line := range b.lines {
		if pending != "" {
			line = strings.TrimLeft(line, " \t")
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimRight(strings.TrimSuffix(line, "\\"), " \t") + " "
			continue
		}
		line, pending = pending+line, ""
		cmd, comment := line, ""
		if loc := commentStart.FindStringIndex(line); loc != nil {
			cmd, comment = line[:loc[0]], strings.TrimSpace(line[loc[1]:])
		}
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, readmeCmd{line: line, cmd: cmd, comment: comment})
		}
	}
	return cmds
}

// normaliseDemo makes two runs of the demo comparable: pids, paths and
// durations differ from run to run.
func normaliseDemo(s string) string {
	for _, r := range []struct{ re, to string }{
		{`pid \d+`, "pid PID"},
		{`NERVE_HOME=[^),]+`, "NERVE_HOME=DIR"},
		{`in \d+(\.\d+)?(ns|µs|ms|s|m)\b`, "in DURATION"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.to)
	}
	return strings.TrimSpace(s)
}

func TestShellCommands(t *testing.T) {
	got := shellCommands(readmeBlock{lines: []string{
		"# on each agent machine",
		"",
		"nerve workflow logs code-review#thread-2 -f   # follow it",
		`nerve run x \`,
		`  --input a="b c"`,
	}})
	want := []readmeCmd{
		{line: "nerve workflow logs code-review#thread-2 -f   # follow it", cmd: "nerve workflow logs code-review#thread-2 -f", comment: "follow it"},
		{line: `nerve run x --input a="b c"`, cmd: `nerve run x --input a="b c"`},
	}
	if len(got) != len(want) {
		t.Fatalf("shellCommands = %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("command %d = %q, want %q", i, got[i], want[i])
		}
	}
	if a, b := normaliseDemo("x (pid 12, NERVE_HOME=/a/b)\nstep 1  author  answered in 54ms (example)"),
		normaliseDemo("x (pid 4242, NERVE_HOME=/c)\nstep 1  author  answered in 1.5s (example)"); a != b {
		t.Errorf("normaliseDemo: %q != %q", a, b)
	}
}

// mergeTopKeys is file with block's top-level keys in it, each replacing
// the file's key of that name: a block that shows remotes replaces what
// init wrote, as a person editing the file would.
func mergeTopKeys(file, block []byte) ([]byte, error) {
	var doc, add yamlv3.Node
	if err := yamlv3.Unmarshal(file, &doc); err != nil {
		return nil, err
	}
	if err := yamlv3.Unmarshal(block, &add); err != nil {
		return nil, err
	}
	top, more := doc.Content[0], add.Content[0]
	for i := 0; i+1 < len(more.Content); i += 2 {
		replaced := false
		for j := 0; j+1 < len(top.Content); j += 2 {
			if top.Content[j].Value == more.Content[i].Value {
				top.Content[j+1], replaced = more.Content[i+1], true
			}
		}
		if !replaced {
			top.Content = append(top.Content, more.Content[i], more.Content[i+1])
		}
	}
	return yamlv3.Marshal(&doc)
}
