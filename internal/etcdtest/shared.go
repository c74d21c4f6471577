package etcdtest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Shared is one cluster for the tests of a package that leave it whole
// (a test that stops members, or counts their requests, starts its own
// with NewCluster). It starts at first use; the package's TestMain stops
// it with Stop once the tests are over, before it looks for goroutines
// left behind. Each test keeps to a key prefix of its own (Prefix), as
// applications sharing one etcd do. A cluster start costs seconds and a
// CPU-second: a package of many etcd tests pays it once.
type Shared struct {
	mu       sync.Mutex
	dir      string
	c        *Cluster
	err      error
	prefixes map[testing.TB]string
}

// Cluster returns the shared cluster, started if it is not yet. It fails
// t if etcd is missing or does not start.
func (s *Shared) Cluster(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil && s.err == nil {
		s.start()
	}
	if s.err != nil {
		t.Fatalf("etcdtest: shared cluster: %v", s.err)
	}
	return s.c
}

func (s *Shared) start() {
	// On /dev/shm (memory) when it is writable, as NewCluster's.
	dir, err := os.MkdirTemp("/dev/shm", "etcdtest-shared-")
	if err != nil {
		if dir, err = os.MkdirTemp("", "etcdtest-shared-"); err != nil {
			s.err = err
			return
		}
	}
	s.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s.c, s.err = StartCluster(ctx, dir)
}

// Stop stops the cluster, if it started, with the clients it made, and
// removes its directory.
func (s *Shared) Stop() error {
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

// Prefix is t's key prefix on the shared cluster: named for t and
// numbered ("/TestName#3/", a subtest's slashes turned to '|'), the same
// for every call of one test and another for each run of it (-count).
func (s *Shared) Prefix(t testing.TB) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.prefixes[t]; ok {
		return p
	}
	if s.prefixes == nil {
		s.prefixes = map[testing.TB]string{}
	}
	p := "/" + strings.ReplaceAll(t.Name(), "/", "|") + "#" + strconv.Itoa(len(s.prefixes)+1) + "/"
	s.prefixes[t] = p
	return p
}
