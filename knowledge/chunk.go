package knowledge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"
)

// Chunk sizes, in lines. Sections shorter than minLines are merged with
// their neighbours up to targetLines; longer than maxLines are cut at inner
// declarations, else at blank lines into windows of about windowLines.
const (
	minLines    = 10
	targetLines = 60
	maxLines    = 150
	windowLines = 80
	// maxChunkBytes cuts a window early on very long lines (minified code).
	maxChunkBytes = 24 << 10
)

// Chunk is one searchable piece of a file.
type Chunk struct {
	StartLine int    // 1-based, inclusive
	EndLine   int    // inclusive
	Symbol    string // what it declares ("Server.Serve", "Install > Linux"), may be ""
	Text      string
	Hash      string // content hash of Text: the key of embedding caches
}

// section is a span of lines, [start, end) 0-based, found by a language's
// chunker.
type section struct {
	start, end int
	symbol     string
}

// boundary is where a top-level unit starts, with what it declares.
type boundary struct {
	line   int // 0-based
	symbol string
}

// ChunkFile cuts a file into chunks that follow its structure. name is the
// slash path, used to pick the language.
func ChunkFile(name string, content []byte) []Chunk {
	lines := splitLines(content)
	if len(lines) == 0 {
		return nil
	}
	var bs []boundary
	var inner func(lines []string, s section) []boundary
	switch ext := strings.ToLower(path.Ext(name)); ext {
	case ".go":
		bs = goBoundaries(content, lines)
		inner = goInner
	case ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs":
		bs = scanBoundaries(lines, tsTop(), commentPrefixes)
		inner = tsInner
	case ".py", ".pyi":
		bs = scanBoundaries(lines, pyTop(), []string{"#", "@"})
		inner = pyInner
	case ".md", ".mdx", ".markdown":
		bs = markdownBoundaries(lines)
	}
	secs := sectionsFrom(bs, len(lines))
	secs = mergeSmall(secs)
	var out []Chunk
	for _, s := range secs {
		for _, p := range splitLarge(lines, s, inner) {
			if c, ok := makeChunk(lines, p); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// splitLines splits content into lines without their terminators.
func splitLines(content []byte) []string {
	if len(content) == 0 {
		return nil
	}
	s := string(content)
	s = strings.TrimSuffix(s, "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// sectionsFrom turns boundaries into sections covering every line: each
// runs to the next boundary; lines before the first form their own.
func sectionsFrom(bs []boundary, n int) []section {
	var out []section
	prev := section{start: 0}
	for _, b := range bs {
		if b.line >= n {
			break
		}
		if b.line <= prev.start {
			if b.line == prev.start {
				prev.symbol = joinSymbol(prev.symbol, b.symbol)
			}
			continue
		}
		prev.end = b.line
		out = append(out, prev)
		prev = section{start: b.line, symbol: b.symbol}
	}
	prev.end = n
	return append(out, prev)
}

// mergeSmall joins short neighbouring sections, so a run of one-line
// declarations is one chunk rather than twenty.
func mergeSmall(secs []section) []section {
	var out []section
	for _, s := range secs {
		if len(out) > 0 {
			last := &out[len(out)-1]
			n, m := last.end-last.start, s.end-s.start
			if (n < minLines || m < minLines/2) && n+m <= targetLines {
				last.end = s.end
				last.symbol = joinSymbol(last.symbol, s.symbol)
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// splitLarge cuts a section longer than maxLines at its inner declarations
// (methods of a class), then what is still too long into windows.
func splitLarge(lines []string, s section, inner func([]string, section) []boundary) []section {
	if s.end-s.start <= maxLines && sectionBytes(lines, s) <= maxChunkBytes {
		return []section{s}
	}
	if inner != nil {
		if bs := inner(lines, s); len(bs) > 0 {
			var out []section
			for _, p := range mergeSmall(subSections(bs, s)) {
				out = append(out, windows(lines, p)...)
			}
			return out
		}
	}
	return windows(lines, s)
}

func subSections(bs []boundary, s section) []section {
	var out []section
	prev := section{start: s.start, symbol: s.symbol}
	for _, b := range bs {
		if b.line <= prev.start || b.line >= s.end {
			continue
		}
		prev.end = b.line
		out = append(out, prev)
		prev = section{start: b.line, symbol: joinSymbol(s.symbol, b.symbol)}
	}
	prev.end = s.end
	return append(out, prev)
}

// windows cuts s into pieces of about windowLines, ending each at a blank
// line near the limit when there is one.
func windows(lines []string, s section) []section {
	var out []section
	for start := s.start; start < s.end; {
		end, size := start, 0
		for end < s.end && end-start < windowLines && (size < maxChunkBytes || end == start) {
			size += len(lines[end]) + 1
			end++
		}
		if end < s.end && end-start == windowLines {
			for j := end - 1; j > start+windowLines*3/4; j-- {
				if strings.TrimSpace(lines[j]) == "" {
					end = j + 1
					break
				}
			}
		}
		if s.end-end < minLines && s.end-start <= maxLines && size < maxChunkBytes {
			end = s.end
		}
		out = append(out, section{start: start, end: end, symbol: s.symbol})
		start = end
	}
	return out
}

func sectionBytes(lines []string, s section) int {
	n := 0
	for _, l := range lines[s.start:s.end] {
		n += len(l) + 1
	}
	return n
}

// makeChunk trims blank lines at both ends; an all-blank section makes no
// chunk.
func makeChunk(lines []string, s section) (Chunk, bool) {
	for s.start < s.end && strings.TrimSpace(lines[s.start]) == "" {
		s.start++
	}
	for s.end > s.start && strings.TrimSpace(lines[s.end-1]) == "" {
		s.end--
	}
	if s.start >= s.end {
		return Chunk{}, false
	}
	text := strings.Join(lines[s.start:s.end], "\n")
	return Chunk{StartLine: s.start + 1, EndLine: s.end, Symbol: s.symbol, Text: text, Hash: hashString(text)}, true
}

func joinSymbol(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case len(a) > 200:
		return a
	}
	return a + " " + b
}

// hashString is the content hash of a chunk: 128 bits of SHA-256, hex.
func hashString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// hashBytes is the content hash of a file.
func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// isBinary reports whether content looks binary: a NUL byte in its first
// 8 KB, as git decides.
func isBinary(content []byte) bool {
	head := content
	if len(head) > 8000 {
		head = head[:8000]
	}
	return bytes.IndexByte(head, 0) >= 0
}
