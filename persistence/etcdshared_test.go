package persistence

import (
	"fmt"
	"os"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/internal/etcdtest"
)

// etcdShared is the etcd cluster of the package's etcd tests that leave it
// whole (TestEtcdWriteWithoutQuorumFails, which kills members, starts its
// own); set once by TestMain before any test runs.
var etcdShared *etcdtest.Shared

// sharedEtcdClient is a client of the shared cluster. Each test keeps to
// its own key prefix (etcdPrefix), owner keys included.
func sharedEtcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := etcdShared.Cluster(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// etcdPrefix is the key prefix of t on the shared cluster.
func etcdPrefix(t *testing.T) string { return etcdShared.Prefix(t) }

// runThenStop runs the tests, then stops the shared cluster: before
// goleak looks for goroutines left behind (its clients' among them).
type runThenStop struct {
	m    *testing.M
	etcd *etcdtest.Shared
}

func (r runThenStop) Run() int {
	code := r.m.Run()
	if err := r.etcd.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "persistence: stop the shared etcd cluster: %v\n", err)
		code = max(code, 1)
	}
	return code
}
