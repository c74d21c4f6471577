package persistence

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (Pebble
// starts several per open database; Close must stop them all).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
