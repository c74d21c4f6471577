package redistest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rscoord/rscoord/client/protocol"
)

// clusterMasters is the number of masters of a test cluster.
const clusterMasters = 3

// clusterReadyTimeout bounds how long StartCluster and WaitHealthy wait for
// every node to agree on cluster_state:ok and the slot map.
const clusterReadyTimeout = 30 * time.Second

// Cluster is a Redis Cluster of 3 masters without replicas on 127.0.0.1;
// the 16384 slots are split evenly in node order (0-5460, 5461-10922,
// 10923-16383), as redis-cli --cluster create does.
type Cluster struct {
	// Nodes are the masters, in slot order.
	Nodes []*Server
	// Addrs are the nodes' addresses, in the same order.
	Addrs []string
	// Announced are the addresses the nodes announce in CLUSTER SLOTS and
	// MOVED answers, in the same order: Addrs, unless the cluster was
	// started WithAnnouncedPorts.
	Announced []string

	mu      sync.Mutex
	clients []*redis.ClusterClient // made by Client, closed by Stop
}

// SlotRange is an inclusive range of hash slots served by one node.
type SlotRange struct{ First, Last int }

// clusterNodeArgs make a redis-server a cluster node; nodes.conf lives in
// the node's own directory.
var clusterNodeArgs = []string{
	"--cluster-enabled", "yes",
	"--cluster-config-file", "nodes.conf",
	"--cluster-node-timeout", "2000",
}

// SlotRanges are the slots of each node, in node order, split as
// redis-cli --cluster create splits them: 0-5460, 5461-10922, 10923-16383.
func SlotRanges() []SlotRange {
	out := make([]SlotRange, clusterMasters)
	per := float64(protocol.RedisSlotCount) / clusterMasters
	first, cursor := 0, 0.0
	for i := range out {
		last := int(math.Round(cursor + per - 1))
		if i == clusterMasters-1 {
			last = protocol.RedisSlotCount - 1
		}
		out[i] = SlotRange{First: first, Last: last}
		first = last + 1
		cursor += per
	}
	return out
}

// ClusterOption changes how StartCluster starts a cluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct{ announcePorts bool }

// WithAnnouncedPorts makes every node announce, to clients, a port on which
// nothing listens (--cluster-announce-port; the cluster bus keeps its real
// port): what a client sees of a cluster behind NAT or a port-forward. Only
// a client that maps Announced to Addrs (Cluster.NATMap) reaches the nodes
// it learns of.
func WithAnnouncedPorts() ClusterOption {
	return func(c *clusterConfig) { c.announcePorts = true }
}

// StartCluster starts 3 cluster-enabled redis-servers under dir (node-0,
// node-1, node-2), assigns the slots, joins them and returns once every node
// reports cluster_state:ok and the same slot map. The caller must Stop it.
func StartCluster(ctx context.Context, dir string, opts ...ClusterOption) (*Cluster, error) {
	var cfg clusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	c := &Cluster{}
	for i := range clusterMasters {
		args := clusterNodeArgs
		announced := 0
		if cfg.announcePorts {
			// A port that was free a moment ago, and stays unused: only
			// the announcement names it.
			p, err := freePort()
			if err != nil {
				return nil, errors.Join(fmt.Errorf("redistest: start cluster: %w", err), c.Stop())
			}
			announced = p
			args = append(slices.Clone(clusterNodeArgs), "--cluster-announce-port", strconv.Itoa(p))
		}
		s, err := StartServer(ctx, filepath.Join(dir, "node-"+strconv.Itoa(i)), args...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("redistest: start cluster: %w", err), c.Stop())
		}
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
		if announced != 0 {
			c.Announced = append(c.Announced, "127.0.0.1:"+strconv.Itoa(announced))
		} else {
			c.Announced = append(c.Announced, s.Addr)
		}
	}
	if err := c.form(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("redistest: start cluster: %w", err), c.Stop())
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("redistest: start cluster: %w", err), c.Stop())
	}
	return c, nil
}

// NewCluster starts a cluster for the test in a t.TempDir() and stops it in
// t.Cleanup. It fails the test if redis-server is missing or the cluster
// does not form.
func NewCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	Require(t)
	dir := t.TempDir() // registered first, so removed after Stop
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("redistest: stop cluster: %v", err)
		}
	})
	return c
}

// NATMap maps each announced address that differs from the node's own
// address to the latter; empty unless the cluster was started
// WithAnnouncedPorts.
func (c *Cluster) NATMap() map[string]string {
	m := map[string]string{}
	for i, a := range c.Announced {
		if a != c.Addrs[i] {
			m[a] = c.Addrs[i]
		}
	}
	return m
}

// Client returns a new go-redis cluster client seeded with every node (and
// mapping announced addresses back, see NATMap). Stop closes it; the caller
// may close it earlier.
func (c *Cluster) Client() *redis.ClusterClient {
	nat := c.NATMap()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, NewClient: func(o *redis.Options) *redis.Client {
		if to, ok := nat[o.Addr]; ok {
			o.Addr = to
		}
		return redis.NewClient(o)
	}})
	c.mu.Lock()
	c.clients = append(c.clients, cc)
	c.mu.Unlock()
	return cc
}

// Stop closes the clients made by Client and stops every node (see
// Server.Stop); it returns every error met.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	clients := c.clients
	c.clients = nil
	c.mu.Unlock()
	for _, cc := range clients {
		_ = cc.Close()
	}
	var errs []error
	for _, s := range c.Nodes {
		if err := s.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NodeForSlot is the index in Nodes of the node serving slot.
func (c *Cluster) NodeForSlot(slot int) int {
	for i, r := range SlotRanges() {
		if slot >= r.First && slot <= r.Last {
			return i
		}
	}
	return -1
}

// form gives each node its slots and a distinct config epoch, then has the
// first node meet the others.
func (c *Cluster) form(ctx context.Context) error {
	ranges := SlotRanges()
	for i, s := range c.Nodes {
		err := withNodeClient(s, func(rc *redis.Client) error {
			if err := rc.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
				return fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", s.Addr, err)
			}
			if err := rc.ClusterAddSlotsRange(ctx, ranges[i].First, ranges[i].Last).Err(); err != nil {
				return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", ranges[i].First, ranges[i].Last, s.Addr, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return withNodeClient(c.Nodes[0], func(rc *redis.Client) error {
		for _, s := range c.Nodes[1:] {
			if err := rc.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(s.Port)).Err(); err != nil {
				return fmt.Errorf("CLUSTER MEET %s from %s: %w", s.Addr, c.Nodes[0].Addr, err)
			}
		}
		return nil
	})
}

// WaitHealthy waits until every node reports cluster_state:ok, knows all 3
// nodes, and answers CLUSTER SLOTS with the expected slot map (each range
// served by its node). It is bounded by ctx and 30 s, and names what was
// still wrong when it gives up. Use it after restarting a node.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		problem := c.checkHealthy(ctx)
		if problem == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for cluster %v to be healthy: %w: %w", c.Addrs, ctx.Err(), problem)
		case <-tick.C:
		}
	}
}

// checkHealthy returns nil when the cluster is healthy, else what is wrong.
func (c *Cluster) checkHealthy(ctx context.Context) error {
	ranges := SlotRanges()
	want := make(map[SlotRange]string, len(ranges))
	for i, r := range ranges {
		want[r] = c.Announced[i]
	}
	for _, s := range c.Nodes {
		err := withNodeClient(s, func(rc *redis.Client) error {
			info, err := rc.ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Errorf("CLUSTER INFO: %w", err)
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return errors.New("cluster_state is not ok")
			}
			if !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))+"\r") {
				return fmt.Errorf("does not know all %d nodes", len(c.Nodes))
			}
			slots, err := rc.ClusterSlots(ctx).Result()
			if err != nil {
				return fmt.Errorf("CLUSTER SLOTS: %w", err)
			}
			if len(slots) != len(ranges) {
				return fmt.Errorf("CLUSTER SLOTS has %d ranges, want %d", len(slots), len(ranges))
			}
			for _, sl := range slots {
				r := SlotRange{First: int(sl.Start), Last: int(sl.End)}
				if len(sl.Nodes) == 0 || want[r] != sl.Nodes[0].Addr {
					return fmt.Errorf("CLUSTER SLOTS range %d-%d served by %v, want %s", r.First, r.Last, sl.Nodes, want[r])
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("node %s: %w", s.Addr, err)
		}
	}
	return nil
}

// withNodeClient runs f with a short-lived direct client of one node.
func withNodeClient(s *Server, f func(*redis.Client) error) error {
	rc := redis.NewClient(&redis.Options{
		Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second,
		MaxRetries: -1, PoolSize: 1, Protocol: 2,
	})
	defer rc.Close()
	return f(rc)
}
