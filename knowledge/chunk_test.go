package knowledge

import (
	"fmt"
	"strings"
	"testing"
)

// chunkAt returns the chunk whose symbol mentions sym.
func chunkAt(t *testing.T, cs []Chunk, sym string) Chunk {
	t.Helper()
	for _, c := range cs {
		for _, s := range strings.Fields(c.Symbol) {
			if s == sym {
				return c
			}
		}
	}
	t.Fatalf("no chunk declares %q in %+v", sym, symbols(cs))
	return Chunk{}
}

func symbols(cs []Chunk) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%d-%d:%s", c.StartLine, c.EndLine, c.Symbol))
	}
	return out
}

// body makes a function body of n lines.
func body(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "\tx%d := %d\n", i, i)
	}
	return b.String()
}

func TestKnowledgeChunkGo(t *testing.T) {
	src := "package bus\n\nimport \"sync\"\n\n" +
		"// SignalBus fans signals out to subscribers.\ntype SignalBus struct {\n\tmu sync.Mutex\n" + body(10) + "}\n\n" +
		"// Publish sends s to every subscriber.\nfunc (b *SignalBus) Publish(s string) {\n" + body(12) + "}\n\n" +
		"func helper() {\n" + body(15) + "}\n"
	cs := ChunkFile("bus/bus.go", []byte(src))
	typ := chunkAt(t, cs, "SignalBus")
	if !strings.HasPrefix(typ.Text, "package bus") && !strings.HasPrefix(typ.Text, "// SignalBus") {
		t.Errorf("type chunk starts %q", firstLine(typ.Text))
	}
	pub := chunkAt(t, cs, "SignalBus.Publish")
	if !strings.HasPrefix(pub.Text, "// Publish sends") {
		t.Errorf("method chunk lacks its doc comment: %q", firstLine(pub.Text))
	}
	lines := strings.Split(src, "\n")
	if got := lines[pub.StartLine-1]; got != "// Publish sends s to every subscriber." {
		t.Errorf("StartLine %d is %q", pub.StartLine, got)
	}
	if got := lines[pub.EndLine-1]; got != "}" {
		t.Errorf("EndLine %d is %q", pub.EndLine, got)
	}
	if pub.Hash != hashString(pub.Text) || pub.Hash == typ.Hash {
		t.Errorf("hashes: %s %s", pub.Hash, typ.Hash)
	}
	chunkAt(t, cs, "helper")
}

func TestKnowledgeChunkGoFallbackAndLineDirective(t *testing.T) {
	// Does not parse: the line heuristic still finds the declarations.
	broken := "package x\n\nfunc A() {\n" + body(20) + "\n\nfunc (s *Srv) B() {\n" + body(20) + "}\n"
	cs := ChunkFile("x.go", []byte(broken))
	chunkAt(t, cs, "A")
	chunkAt(t, cs, "Srv.B")
	// A //line directive must not move chunks off the file's own lines.
	src := "package main\n\nfunc main() {\n//line other.go:999999\n\tprintln()\n}\n\nvar flag bool\n"
	for _, c := range ChunkFile("m.go", []byte(src)) {
		if c.EndLine > 8 {
			t.Errorf("chunk %d-%d beyond the file", c.StartLine, c.EndLine)
		}
	}
}

func TestKnowledgeChunkTypeScript(t *testing.T) {
	src := "import { x } from './x';\n\n" +
		"/** Routes signals. */\nexport class SignalRouter {\n" + strings.Repeat("  field = 1;\n", 12) + "}\n\n" +
		"export async function dispatch(s: string): Promise<void> {\n" + strings.Repeat("  await x(s);\n", 12) + "}\n\n" +
		"export const handler = () => {\n" + strings.Repeat("  x();\n", 12) + "};\n"
	cs := ChunkFile("src/router.ts", []byte(src))
	c := chunkAt(t, cs, "SignalRouter")
	if !strings.Contains(c.Text, "/** Routes signals. */\nexport class SignalRouter") {
		t.Errorf("class chunk lacks its doc comment: %q", c.Text)
	}
	chunkAt(t, cs, "dispatch")
	chunkAt(t, cs, "handler")
	// A long class is cut at its methods.
	var b strings.Builder
	b.WriteString("export class Big {\n")
	for i := range 6 {
		fmt.Fprintf(&b, "  method%d(a: number): number {\n%s    return a;\n  }\n", i, strings.Repeat("    a += 1;\n", 40))
	}
	b.WriteString("}\n")
	cs = ChunkFile("big.ts", []byte(b.String()))
	chunkAt(t, cs, "method3")
	for _, c := range cs {
		if c.EndLine-c.StartLine+1 > maxLines {
			t.Errorf("chunk %d-%d longer than %d lines", c.StartLine, c.EndLine, maxLines)
		}
	}
}

func TestKnowledgeChunkPython(t *testing.T) {
	src := "import os\n\n\n@dataclass\nclass Lease:\n    \"\"\"A claim on a turn.\"\"\"\n" + strings.Repeat("    x: int = 0\n", 12) +
		"\n\nasync def renew_lease(lease):\n" + strings.Repeat("    await sleep(1)\n", 12) +
		"\n\ndef _helper():\n" + strings.Repeat("    pass\n", 12)
	cs := ChunkFile("lease.py", []byte(src))
	c := chunkAt(t, cs, "Lease")
	if !strings.Contains(c.Text, "@dataclass\nclass Lease:") {
		t.Errorf("class chunk lacks its decorator: %q", c.Text)
	}
	chunkAt(t, cs, "renew_lease")
	chunkAt(t, cs, "_helper")
}

func TestKnowledgeChunkMarkdown(t *testing.T) {
	para := strings.Repeat("Some words about this part of the guide.\n", 12)
	src := "# Guide\n\nIntro.\n" + para + "\n## Install\n\n" + para + "```sh\n# not a heading\nmake\n```\n\n### Linux\n\n" + para + "\n## Use\n\n" + para
	cs := ChunkFile("docs/guide.md", []byte(src))
	chunkAt(t, cs, "Linux")
	c := chunkAt(t, cs, "Install")
	if !strings.Contains(c.Text, "# not a heading") {
		t.Errorf("a fenced comment split the section: %q", c.Text)
	}
	for _, c := range cs {
		if strings.HasPrefix(c.Text, "# not a heading") {
			t.Errorf("fenced line started a section")
		}
	}
	if !strings.Contains(chunkAt(t, cs, "Linux").Symbol, "Guide > Install > Linux") {
		t.Errorf("Linux section's symbol is %q", chunkAt(t, cs, "Linux").Symbol)
	}
}

func TestKnowledgeChunkWindows(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "line %d of a plain text file\n", i)
	}
	cs := ChunkFile("notes.txt", []byte(b.String()))
	if len(cs) < 4 {
		t.Fatalf("%d chunks for 400 lines", len(cs))
	}
	next := 1
	for _, c := range cs {
		if c.StartLine != next {
			t.Errorf("gap or overlap: chunk starts at %d, want %d", c.StartLine, next)
		}
		if n := c.EndLine - c.StartLine + 1; n > windowLines {
			t.Errorf("window of %d lines", n)
		}
		next = c.EndLine + 1
	}
	if next != 401 {
		t.Errorf("chunks end at %d, want 400", next-1)
	}
	if cs := ChunkFile("empty.txt", []byte("\n\n  \n")); len(cs) != 0 {
		t.Errorf("blank file gave %d chunks", len(cs))
	}
	// One huge line (minified code) is still one chunk, not a hang.
	if cs := ChunkFile("min.js", []byte(strings.Repeat("a=1;", 100000))); len(cs) != 1 {
		t.Errorf("minified line gave %d chunks", len(cs))
	}
}

func TestKnowledgeBinary(t *testing.T) {
	if !isBinary([]byte("PNG\x00\x01")) || isBinary([]byte("plain text\n")) {
		t.Error("isBinary")
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
