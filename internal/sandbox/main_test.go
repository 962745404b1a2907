package sandbox

import (
	"testing"

	"github.com/nerve-agents/nerve/internal/testhome"
)

// TestMain gives the tests a HOME, NERVE_HOME and XDG directories of their own.
func TestMain(m *testing.M) { testhome.Main(m) }
