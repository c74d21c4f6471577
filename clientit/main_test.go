package clientit_test

import (
	"testing"

	"github.com/rscoord/rscoord/internal/leakcheck"
)

// TestMain checks for leaked goroutines: TestOrdersExampleRuns runs a
// coordinator (its actor system) and a Redis client in this process.
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
