package threadquery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/nerve-agents/nerve/workflow"
)

// tailChunk is how much of a snapshot's end is read first for its last
// messages: a message is a few KB, so the usual --last 3 fits.
const tailChunk = 16 << 10

// readSnapshot reads the snapshot's last tail messages (0: all). A
// snapshot is one JSON message a line; decoding is most of the cost of
// `nerve thread messages` inside a turn, so lines before the tail are
// not decoded, nor read: a long thread's snapshot is megabytes.
func readSnapshot(path string, tail int) ([]workflow.Message, error) {
	lines, err := snapshotLines(path, tail)
	if err != nil {
		return nil, fmt.Errorf("read thread snapshot: %w", err)
	}
	out := make([]workflow.Message, 0, len(lines))
	for _, line := range lines {
		var m workflow.Message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("thread snapshot %s: %w", path, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// snapshotLines returns the file's lines, or its last tail lines when
// tail > 0; trailing newlines end no line.
func snapshotLines(path string, tail int) ([][]byte, error) {
	if tail <= 0 {
		data, err := os.ReadFile(path)
		return splitLines(data), err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return readTail(f, st.Size(), tail, tailChunk)
}

// readTail returns what splitLines(all of r) ends with, its last n lines,
// reading r's end from chunk bytes on, doubling until they are in.
func readTail(r io.ReaderAt, size int64, n int, chunk int64) ([][]byte, error) {
	for ; ; chunk *= 2 {
		off := max(size-chunk, 0)
		buf := make([]byte, size-off)
		if _, err := r.ReadAt(buf, off); err != nil && err != io.EOF {
			return nil, err
		}
		lines := splitLines(buf)
		if off == 0 {
			return lines[max(len(lines)-n, 0):], nil
		}
		if len(lines)-1 >= n { // the first line may start before off
			return lines[len(lines)-n:], nil
		}
	}
}

func splitLines(data []byte) [][]byte {
	if len(data) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
}
