package adapter

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Memory bounds. A CLI may print gigabytes or one enormous line; nerve
// keeps only what parsing needs, so a runaway agent cannot take the daemon
// down with it.
const (
	// maxLineBytes caps one stdout line. It is large because a stream-json
	// CLI prints its whole answer as one JSON line; past it the line is cut
	// (and so no longer parses).
	maxLineBytes = 8 << 20
	// MaxContentBytes caps the content kept for a turn; more is dropped and
	// the result is marked truncated.
	MaxContentBytes = 1 << 20
	// stderrTailLines and stderrLineBytes bound the stderr kept for errors
	// (20 lines of at most 400 bytes: 8 KiB).
	stderrTailLines = 20
	stderrLineBytes = 400
	// lastOutputLines and lastOutputBytes bound the stdout kept to explain
	// a missing final event.
	lastOutputLines = 3
	lastOutputBytes = 300
)

// truncationNote ends content that hit MaxContentBytes, so a reader of the
// message (a person or the moderator) sees that it was cut.
const truncationNote = "\n[nerve: output truncated at 1 MiB]"

// lineSplitter cuts a stream into lines as its bytes arrive, calling fn
// for each (without its line ending) and cutting lines longer than max.
type lineSplitter struct {
	max int
	fn  func(line []byte, cut bool)
	buf []byte // the line so far
	cut bool
}

func newLineSplitter(max int, fn func(line []byte, cut bool)) *lineSplitter {
	return &lineSplitter{max: max, fn: fn}
}

func (l *lineSplitter) write(p []byte) {
	for len(p) > 0 {
		chunk, rest, ended := p, []byte(nil), false
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			chunk, rest, ended = p[:i+1], p[i+1:], true
		}
		if room := l.max - len(l.buf); len(chunk) <= room {
			l.buf = append(l.buf, chunk...)
		} else {
			if room > 0 {
				l.buf = append(l.buf, chunk[:room]...)
			}
			l.cut = true
		}
		if ended {
			l.flush()
		}
		p = rest
	}
}

// close ends the stream: a last line without a line ending still counts.
func (l *lineSplitter) close() { l.flush() }

func (l *lineSplitter) flush() {
	if len(l.buf) > 0 {
		l.fn(bytes.TrimRight(l.buf, "\r\n"), l.cut)
	}
	if cap(l.buf) > 1<<20 {
		l.buf = nil // do not hold a huge buffer for the rest of the run
	}
	l.buf, l.cut = l.buf[:0], false
}

// textBuf accumulates content up to MaxContentBytes.
type textBuf struct {
	b         strings.Builder
	truncated bool
}

func (t *textBuf) WriteString(s string) {
	if t.truncated {
		return
	}
	if room := MaxContentBytes - t.b.Len(); len(s) > room {
		s = validUTF8Prefix(s[:room])
		t.truncated = true
	}
	t.b.WriteString(s)
}

func (t *textBuf) Reset() { t.b.Reset(); t.truncated = false }

func (t *textBuf) Len() int { return t.b.Len() }

// String returns the content, with a note appended when it was cut.
func (t *textBuf) String() string {
	if t.truncated {
		return t.b.String() + truncationNote
	}
	return t.b.String()
}

// validUTF8Prefix drops a partial rune left at the end by byte slicing.
func validUTF8Prefix(s string) string {
	for i := 0; i < 4 && len(s) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			return s
		}
		s = s[:len(s)-1]
	}
	return s
}

// tail keeps the last n non-blank lines, each cut to width bytes, for
// error messages (stderr) and for explaining a missing final event
// (stdout). A line's buffer is made when the ring first reaches it and
// reused after: a CLI printing millions of lines costs copies, not
// allocations, and one printing nothing (most turns' stderr) costs none.
type tail struct {
	ring  [][]byte
	next  int
	count int
	width int
}

func newTail(n, width int) *tail {
	return &tail{ring: make([][]byte, n), width: width}
}

func (t *tail) add(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if len(line) > t.width {
		line = line[:t.width]
	}
	buf := t.ring[t.next]
	if buf == nil {
		buf = make([]byte, 0, t.width)
	}
	t.ring[t.next] = append(buf[:0], line...)
	t.next = (t.next + 1) % len(t.ring)
	if t.count < len(t.ring) {
		t.count++
	}
}

// get returns the lines held, oldest first.
func (t *tail) get() []string {
	out := make([]string, 0, t.count)
	for i := 0; i < t.count; i++ {
		j := (t.next - t.count + i + len(t.ring)) % len(t.ring)
		out = append(out, strings.ToValidUTF8(string(t.ring[j]), "?"))
	}
	return out
}

// jsonLine decodes a stdout line of a stream-json CLI. Lines that are not
// a JSON object (banners, warnings, a cut line) report false and are
// ignored: only the final event decides the outcome.
func jsonLine(line []byte, v any) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	return json.Unmarshal(line, v) == nil
}

// noResult is the reason given when a stream ended without its final event.
func noResult(event string, last []string) string {
	s := "no " + event + " event"
	if out := lastLines(last, lastOutputLines, lastOutputBytes); out != "" {
		return s + "; last output: " + out
	}
	return s + "; no output"
}

// val is a counted figure, 0 while none was reported.
func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
