package fswatch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBurstIsOneBatch(t *testing.T) {
	dir := t.TempDir()
	w, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := filepath.Join(dir, "a.yaml")
	w.Keep = func(p string) bool { return p == want }
	w.Settle = 50 * time.Millisecond
	batches := make(chan []string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, func(p []string) { batches <- p }); close(done) }()

	// An editor's save: a temp file written, then renamed into place,
	// then touched again; and a file nobody asked about.
	tmp := filepath.Join(dir, ".a.yaml.swp")
	write(t, tmp, "one")
	if err := os.Rename(tmp, want); err != nil {
		t.Fatal(err)
	}
	write(t, want, "two")
	write(t, filepath.Join(dir, "other"), "x")

	select {
	case got := <-batches:
		if !slices.Equal(got, []string{want}) {
			t.Fatalf("batch = %v, want [%s]", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no batch within 5s")
	}
	select {
	case got := <-batches:
		t.Fatalf("a second batch %v for one burst", got)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNewNamesTheDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := New(missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %v, want one naming %s", err, missing)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
