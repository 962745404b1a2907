package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesWhole(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{
		"synced": WriteFile, "unsynced": WriteFileNoSync,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			for _, content := range []string{"first\n", "second, longer\n"} {
				if err := write(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil || string(got) != content {
					t.Fatalf("read %q, %v; want %q", got, err, content)
				}
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Fatalf("temp files left: %v", entries)
			}
		})
	}
}
