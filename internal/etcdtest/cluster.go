package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// clusterSize is the number of members of a test cluster: the smallest that
// survives the loss of one.
const clusterSize = 3

// Bounds of cluster start-up.
const (
	// healthyTimeout bounds how long StartCluster waits for every member to
	// report a leader.
	healthyTimeout = 30 * time.Second
	// startAttempts is how many sets of ports StartCluster tries when a
	// member exits at once (most often: another process took a port first).
	startAttempts = 3
)

// Cluster is a 3-member etcd cluster on 127.0.0.1.
type Cluster struct {
	// Members are the servers, in name order (etcd-0, etcd-1, etcd-2).
	Members []*Member
	// Dir holds one directory per member.
	Dir string

	mu      sync.Mutex
	clients []*clientv3.Client // made by Client, closed by Stop
}

// StartCluster starts 3 etcd members under dir (etcd-0, etcd-1, etcd-2)
// and returns once each reports itself healthy (a leader is elected and
// reads are served). If a member exits during start-up, the cluster is torn
// down and started again on new ports, up to 3 times. The caller must Stop
// it.
func StartCluster(ctx context.Context, dir string) (*Cluster, error) {
	if _, err := exec.LookPath(serverBinary); err != nil {
		return nil, fmt.Errorf("etcdtest: start cluster: %s", missingMessage)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: start cluster: %w", err)
	}
	var errs []error
	for attempt := range startAttempts {
		c, err := startOnce(ctx, filepath.Join(abs, "try-"+strconv.Itoa(attempt)))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errExited) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("etcdtest: start cluster in %s: %w", dir, errors.Join(errs...))
}

// startOnce starts the members on fresh ports under dir.
func startOnce(ctx context.Context, dir string) (*Cluster, error) {
	ports, err := freePorts(2 * clusterSize)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	var initial []string
	for i := range clusterSize {
		name := "etcd-" + strconv.Itoa(i)
		initial = append(initial, fmt.Sprintf("%s=http://127.0.0.1:%d", name, ports[2*i+1]))
	}
	token := "etcdtest-" + strconv.Itoa(ports[0])
	for i := range clusterSize {
		name := "etcd-" + strconv.Itoa(i)
		c.Members = append(c.Members, newMember(name, filepath.Join(dir, name), ports[2*i], ports[2*i+1], strings.Join(initial, ","), token))
	}
	// Members of a new cluster wait for each other, so all start before any
	// is asked for health.
	errs := make([]error, clusterSize)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	hctx, cancel := context.WithTimeout(ctx, healthyTimeout)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// NewCluster starts a cluster for the test in a fresh directory (on
// /dev/shm when possible) and stops it, and removes the directory, in
// t.Cleanup. It fails the test if etcd is missing or does not start.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	dir := scratchDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("etcdtest: stop: %v", err)
		}
	})
	return c
}

// scratchDir is a directory removed at the end of the test: on /dev/shm
// (memory) when that is writable, else under t.TempDir.
func scratchDir(t testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "etcdtest-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) }) // registered first: runs after Stop
			return d
		}
	}
	return t.TempDir()
}

// Endpoints are the client URLs of every member, in member order.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.ClientURL
	}
	return out
}

// Client returns a new etcd client of every member, with a 2 s dial timeout
// and etcd's logging off. Stop closes it; the caller may close it earlier.
func (c *Cluster) Client() (*clientv3.Client, error) {
	return c.ClientOf(c.Endpoints()...)
}

// ClientOf returns a client of the given endpoints only (e.g. one member's
// ClientURL, to talk to that member alone). Stop closes it.
func (c *Cluster) ClientOf(endpoints ...string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdtest: client of %v: %w", endpoints, err)
	}
	c.mu.Lock()
	c.clients = append(c.clients, cli)
	c.mu.Unlock()
	return cli, nil
}

// WaitHealthy waits until every running member reports itself healthy, or
// ctx ends. With fewer than 2 members running it cannot succeed.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var errs []error
		for _, m := range c.Members {
			if m.Running() {
				if err := m.Healthy(ctx); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if len(errs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: cluster not healthy: %w: %w", ctx.Err(), errors.Join(errs...))
		case <-tick.C:
		}
	}
}

// Leader returns the member that is the raft leader now, as the running
// members see it.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	cli, err := c.Client()
	if err != nil {
		return nil, err
	}
	defer c.closeClient(cli)
	ids := map[uint64]*Member{}
	var leader uint64
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err != nil || st.Header == nil {
			continue
		}
		ids[st.Header.MemberId] = m
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	if l, ok := ids[leader]; ok {
		return l, nil
	}
	return nil, errors.New("etcdtest: no running member knows a running leader")
}

// closeClient closes cli and forgets it.
func (c *Cluster) closeClient(cli *clientv3.Client) {
	c.mu.Lock()
	for i, x := range c.clients {
		if x == cli {
			c.clients = append(c.clients[:i], c.clients[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	_ = cli.Close()
}

// Stop closes the clients made by Client, then kills every member and
// waits for them: the cluster is being thrown away, and a graceful stop of
// members whose peers are gone takes seconds. The data directories stay;
// NewCluster removes them.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	clients := c.clients
	c.clients = nil
	c.mu.Unlock()
	for _, cli := range clients {
		_ = cli.Close()
	}
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.Kill() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// Another process may take one before etcd binds it; StartCluster then
// retries with new ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: find a free loopback port: %w", err)
		}
		ls = append(ls, l) // held until all are chosen, so all differ
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
