package persistence

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/internal/etcdtest"
)

// TestMain fails the package if any test leaves a goroutine behind (Pebble
// starts several per open database; Close must stop them all). The shared
// etcd cluster of the etcd tests stops first.
func TestMain(m *testing.M) {
	etcdShared = &etcdtest.Shared{}
	goleak.VerifyTestMain(runThenStop{m: m, etcd: etcdShared})
}
