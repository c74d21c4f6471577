package persistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/internal/etcdtest"
)

// sharedEtcd is one real 3-member etcd cluster for the package's etcd
// tests that leave it whole (a test that kills members starts its own).
// It starts at first use and TestMain stops it. Each test keeps to a key
// prefix of its own (etcdPrefix), as coordinator clusters sharing one etcd
// do: a cluster start is seconds of wall and a CPU-second, per test.
type sharedEtcd struct {
	mu  sync.Mutex
	dir string
	c   *etcdtest.Cluster
	cli *clientv3.Client
	err error
}

// etcdShared is set once by TestMain before any test runs.
var etcdShared *sharedEtcd

// client is a client of the shared cluster, started if it is not yet.
func (s *sharedEtcd) client(t *testing.T) *clientv3.Client {
	t.Helper()
	etcdtest.Require(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil && s.err == nil {
		s.start()
	}
	if s.err != nil {
		t.Fatalf("shared etcd cluster: %v", s.err)
	}
	return s.cli
}

func (s *sharedEtcd) start() {
	// On /dev/shm (memory) when it is writable, as etcdtest.NewCluster.
	dir, err := os.MkdirTemp("/dev/shm", "persistence-etcd-")
	if err != nil {
		if dir, err = os.MkdirTemp("", "persistence-etcd-"); err != nil {
			s.err = err
			return
		}
	}
	s.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if s.c, s.err = etcdtest.StartCluster(ctx, dir); s.err == nil {
		s.cli, s.err = s.c.Client()
	}
}

// stop stops the cluster, if it started, and removes its directory.
func (s *sharedEtcd) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.c != nil {
		errs = append(errs, s.c.Stop())
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

// etcdPrefix is the key prefix of t (its name) on the shared cluster.
func etcdPrefix(t *testing.T) string {
	return "/" + strings.ReplaceAll(t.Name(), "/", "|") + "/"
}

// runThenStop runs the tests, then stops the shared cluster: before
// goleak looks for goroutines left behind (the client's among them).
type runThenStop struct {
	m    *testing.M
	etcd *sharedEtcd
}

func (r runThenStop) Run() int {
	code := r.m.Run()
	if err := r.etcd.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "persistence: stop the shared etcd cluster: %v\n", err)
		code = max(code, 1)
	}
	return code
}
