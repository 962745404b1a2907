package threadquery

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The tail read from the end ends as the whole file split does, whatever
// the lines' lengths against the chunk, blank lines and trailing
// newlines included.
func TestReadTailIsTheSplitsEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	contents := []string{"", "\n", "\n\n\n", "x", "x\n", "a\nb", "a\n\nb\n\n", "\n\na\n"}
	for range 200 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(strings.Repeat("m", rng.IntN(40)))
			b.WriteString(strings.Repeat("\n", 1+rng.IntN(2)*rng.IntN(3)))
		}
		contents = append(contents, b.String())
	}
	for _, c := range contents {
		all := splitLines([]byte(c))
		for n := 1; n <= len(all)+1; n++ {
			want := all[max(len(all)-n, 0):]
			for _, chunk := range []int64{1, 3, 16, 1 << 10} {
				got, err := readTail(strings.NewReader(c), int64(len(c)), n, chunk)
				if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
					t.Fatalf("%q, last %d, chunk %d: %q %v, want %q", c, n, chunk, got, err, want)
				}
			}
		}
	}
}

// The usual question reads the end of a long snapshot only.
func TestReadTailReadsTheEnd(t *testing.T) {
	line := strings.Repeat("x", 1000) + "\n"
	r := &countingReader{Reader: strings.NewReader(strings.Repeat(line, 1000))}
	got, err := readTail(r, int64(r.Len()), 3, tailChunk)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2], []byte(line[:1000])) {
		t.Fatalf("%d lines, %v", len(got), err)
	}
	if r.read > tailChunk {
		t.Fatalf("read %d bytes of %d for 3 lines", r.read, r.Size())
	}
}

type countingReader struct {
	*strings.Reader
	read int64
}

func (r *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Reader.ReadAt(p, off)
	r.read += int64(n)
	return n, err
}
