package remote

import (
	"errors"
	"os"
	"testing"
)

func asError(err error, target **Error) bool { return errors.As(err, target) }

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
