package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/persistence"
)

// envEtcdPassword holds the etcd password: secrets stay off the command
// line.
const envEtcdPassword = "RSCOORD_ETCD_PASSWORD"

// coordinatorUnit is the one placement unit of this build's cluster mode:
// the replica holding its owner key runs every group and stream; the others
// stand by (see docs/protocol-notes.md, cluster mode).
const coordinatorUnit = "coordinator"

// StoreFlags choose and configure the store.
type StoreFlags struct {
	Store         string        `default:"pebble" enum:"pebble,etcd" env:"RSCOORD_STORE" help:"Store engine: pebble (embedded, one process) or etcd (the cluster mode: several replicas share one etcd cluster)."`
	EtcdEndpoints []string      `placeholder:"URL,…" sep:"," env:"RSCOORD_ETCD_ENDPOINTS" help:"etcd client URLs (--store etcd); list every member, so losing one does not matter."`
	EtcdPrefix    string        `default:"/rscoord/" env:"RSCOORD_ETCD_PREFIX" help:"Key prefix of this coordinator cluster in etcd; every replica of one cluster uses the same."`
	EtcdUsername  string        `env:"RSCOORD_ETCD_USERNAME" help:"etcd user (its password comes from RSCOORD_ETCD_PASSWORD)."`
	EtcdCA        string        `placeholder:"FILE" env:"RSCOORD_ETCD_CA" help:"PEM CA bundle that signs the etcd servers' certificates (turns TLS on)."`
	EtcdCert      string        `placeholder:"FILE" env:"RSCOORD_ETCD_CERT" help:"PEM client certificate for etcd (with --etcd-key)."`
	EtcdKey       string        `placeholder:"FILE" env:"RSCOORD_ETCD_KEY" help:"PEM private key of --etcd-cert."`
	EtcdLeaseTTL  time.Duration `default:"2s" env:"RSCOORD_ETCD_LEASE_TTL" help:"etcd lease of this replica: how long a dead or frozen replica keeps ownership (a failover takes about this long plus up to 0.5 s). At least 2s; keep it well under --member-lease."`
	AdvertiseURL  string        `placeholder:"URL" env:"RSCOORD_ADVERTISE_URL" help:"http(s) URL other replicas and clients reach this replica at (--store etcd)."`
	ReplicaID     string        `env:"RSCOORD_REPLICA_ID" help:"Unique name of this replica (--store etcd); default: the advertise URL's host and port."`
}

// validate reports every problem of the store flags.
func (f *StoreFlags) validate(memberLease time.Duration) []error {
	if f.Store != "etcd" {
		return nil
	}
	var errs []error
	if len(f.EtcdEndpoints) == 0 {
		errs = append(errs, errors.New("--store etcd needs --etcd-endpoints"))
	}
	if f.AdvertiseURL == "" {
		errs = append(errs, errors.New("--store etcd needs --advertise-url"))
	}
	if (f.EtcdCert == "") != (f.EtcdKey == "") {
		errs = append(errs, errors.New("--etcd-cert and --etcd-key go together"))
	}
	if f.EtcdLeaseTTL < cluster.MinLeaseTTL {
		errs = append(errs, fmt.Errorf("--etcd-lease-ttl %v is below %v", f.EtcdLeaseTTL, cluster.MinLeaseTTL))
	}
	if f.EtcdLeaseTTL*2 > memberLease {
		errs = append(errs, fmt.Errorf("--etcd-lease-ttl %v is over half of --member-lease %v: members would fail closed before a dead replica's groups move", f.EtcdLeaseTTL, memberLease))
	}
	if !strings.HasSuffix(f.EtcdPrefix, "/") {
		errs = append(errs, fmt.Errorf("--etcd-prefix %q must end in /", f.EtcdPrefix))
	}
	return errs
}

// etcdClient dials the etcd cluster with the TLS and user flags.
func (f *StoreFlags) etcdClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   f.EtcdEndpoints,
		DialTimeout: 5 * time.Second,
		Username:    f.EtcdUsername,
		Password:    os.Getenv(envEtcdPassword),
		Logger:      zap.NewNop(),
	}
	if f.EtcdCA != "" || f.EtcdCert != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.EtcdCA != "" {
			pem, err := os.ReadFile(f.EtcdCA)
			if err != nil {
				return nil, fmt.Errorf("--etcd-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--etcd-ca %s: no PEM certificate", f.EtcdCA)
			}
			t.RootCAs = pool
		}
		if f.EtcdCert != "" {
			cert, err := tls.LoadX509KeyPair(f.EtcdCert, f.EtcdKey)
			if err != nil {
				return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
			}
			t.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = t
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// replica is this process's place in the cluster mode: the etcd client,
// the cluster node and, once claimed, the coordinator unit.
type replica struct {
	cli   *clientv3.Client
	node  *cluster.Node
	log   *slog.Logger
	front *front

	closeOnce sync.Once
	closeErr  error
}

// openStore opens the store the flags name. With --store etcd it first
// joins the cluster and waits (standing by: f forwards to the owner) until
// this replica holds the coordinator unit; ok is false when ctx ended
// first.
func (s *ServeCmd) openStore(ctx context.Context, log *slog.Logger, f *front) (store persistence.Store, rep *replica, ok bool, err error) {
	if s.Store != "etcd" {
		ps, err := persistence.OpenPebble(s.DataDir, persistence.Options{Logger: log})
		return ps, nil, err == nil, err
	}
	cli, err := s.etcdClient()
	if err != nil {
		return nil, nil, false, err
	}
	id := s.replicaID()
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	node, err := cluster.Join(jctx, cluster.Options{
		Client: cli, Root: s.EtcdPrefix, ID: id, AdvertiseURL: s.AdvertiseURL, LeaseTTL: s.EtcdLeaseTTL, Logger: log,
	})
	cancel()
	if err != nil {
		return nil, nil, false, errors.Join(err, cli.Close())
	}
	rep = &replica{cli: cli, node: node, log: log, front: f}
	f.node.Store(node)
	log.Info("joined the coordinator cluster", slog.String("replica", id), slog.String("advertiseUrl", s.AdvertiseURL),
		slog.Duration("leaseTTL", s.EtcdLeaseTTL))
	if !rep.awaitOwnership(ctx) {
		closeErr := rep.close(context.Background())
		if ctx.Err() == nil { // the lease was lost while standing by
			return nil, nil, false, errors.Join(cluster.ErrLeaseLost, closeErr)
		}
		return nil, nil, false, closeErr
	}
	es, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{
		Client: cli, Prefix: s.EtcdPrefix + "data/", Logger: log,
		// Every unit is fenced by the one coordinator owner key.
		Fence: func(string) (string, int64, bool) {
			f, ok := node.FenceOf(coordinatorUnit)
			return f.Key, f.CreateRevision, ok
		},
	})
	if err != nil {
		return nil, nil, false, errors.Join(err, rep.close(context.Background()))
	}
	return es, rep, true, nil
}

// awaitOwnership claims the coordinator unit, retrying whenever an owner
// key goes away, until it holds it (true) or ctx ends or the lease is lost
// (false).
func (r *replica) awaitOwnership(ctx context.Context) bool {
	logged := false
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := r.node.Claim(cctx, coordinatorUnit)
		cancel()
		if err == nil {
			r.log.Info("this replica owns the coordinator: loading state")
			return true
		}
		if errors.Is(err, cluster.ErrLeaseLost) {
			r.log.Error("replica lease lost while standing by")
			return false
		}
		if !logged {
			holder, _ := r.node.Holder(coordinatorUnit)
			r.log.Info("standing by", slog.String("owner", holder.ID), slog.String("ownerUrl", holder.AdvertiseURL), slog.Any("reason", err))
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.node.Done():
			return false
		case <-r.node.OwnerChanges():
		case <-time.After(time.Second):
		}
	}
}

// close gives the coordinator unit up (SIGTERM: the next replica takes
// over at once instead of one lease later) and leaves the cluster.
// Later calls return the first call's error.
func (r *replica) close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r.closeErr = errors.Join(r.node.Leave(ctx), r.cli.Close())
		r.front.node.CompareAndSwap(r.node, nil)
	})
	return r.closeErr
}

// lostLease is the error of a serve that stopped because the lease was
// lost, nil otherwise.
func lostLease(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, cluster.ErrLeaseLost) {
		return err
	}
	return nil
}

// runCluster serves a cluster-mode replica: it listens from the start and
// answers through a front that forwards to the owner while this replica
// stands by, and serves the coordinator itself while it owns it.
func (s *ServeCmd) runCluster(ctx context.Context, log *slog.Logger) error {
	f := newFront(s.replicaID(), log, assign.Config{
		HeartbeatInterval: s.HeartbeatInterval, MemberLease: s.MemberLease, RebalanceTimeout: s.RebalanceTimeout,
	}, max(2*s.HeartbeatInterval, 5*time.Second))
	srv, ln, err := s.listen(f, log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("replica listening", slog.String("address", ln.Addr().String()), slog.String("replica", f.self),
		slog.String("advertiseUrl", s.AdvertiseURL))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	runErr := s.rejoinLoop(ctx, log, f)
	closeCtx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	httpErr := srv.Shutdown(closeCtx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		httpErr = errors.Join(httpErr, serveErr)
	}
	if err := errors.Join(runErr, httpErr); err != nil {
		return err
	}
	return nil
}

// replicaID is --replica-id, by default the advertise URL's host and port.
func (s *ServeCmd) replicaID() string {
	if s.ReplicaID != "" {
		return s.ReplicaID
	}
	return strings.TrimPrefix(strings.TrimPrefix(s.AdvertiseURL, "https://"), "http://")
}

// ready is the cluster's part of /readyz on the owner: its lease is
// certain. (A stand-by's /readyz is answered by its front: ready while it
// knows a live owner to forward to.)
func (r *replica) ready(context.Context) error {
	if !r.node.Valid() {
		return errors.New("cluster: this replica's etcd lease is not certain")
	}
	return nil
}

// view is GET /coord/v1/monitoring/cluster on the owner: the registered
// replicas, who holds which unit, and every group with its owner (the
// holder of the coordinator unit: one replica runs every group).
func (r *replica) view(ctx context.Context, coord *actors.Coordinator) (protocol.ClusterResponse, error) {
	groups, err := coord.Groups(ctx)
	if err != nil {
		return protocol.ClusterResponse{}, err
	}
	holders := r.node.Holders()
	owner, owned := holders[coordinatorUnit]
	out := protocol.ClusterResponse{Store: "etcd", Replicas: []protocol.ClusterReplica{}, Groups: []protocol.ClusterGroup{}}
	describe := func(rep cluster.Replica, live bool) protocol.ClusterReplica {
		c := protocol.ClusterReplica{ID: rep.ID, AdvertiseURL: rep.AdvertiseURL, Live: live, Role: protocol.RoleStandby, Units: []string{}}
		for unit, h := range holders {
			if h.ID == rep.ID {
				c.Units = append(c.Units, unit)
			}
		}
		slices.Sort(c.Units)
		if owned && owner.ID == rep.ID {
			c.Role, c.GroupsOwned = protocol.RoleOwner, len(groups.Groups)
		}
		return c
	}
	seen := map[string]bool{}
	for _, rep := range r.node.Replicas() {
		seen[rep.ID] = true
		out.Replicas = append(out.Replicas, describe(rep, true))
	}
	if owned && !seen[owner.ID] {
		out.Replicas = append(out.Replicas, describe(owner, false))
	}
	out.Self = describe(r.node.Self(), slices.ContainsFunc(out.Replicas, func(c protocol.ClusterReplica) bool {
		return c.ID == r.node.Self().ID && c.Live
	}))
	for _, g := range groups.Groups {
		cg := protocol.ClusterGroup{StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup}
		if owned {
			cg.Owner, cg.OwnerURL = owner.ID, owner.AdvertiseURL
		}
		out.Groups = append(out.Groups, cg)
	}
	return out, nil
}

// publishGauges keeps the cluster gauges of the owner's metrics current
// until ctx ends: live replicas, and groups nobody owns (all of them while
// this replica's lease is not certain, none otherwise: one replica runs
// every group).
func (r *replica) publishGauges(ctx context.Context, coord *actors.Coordinator, m *metrics.Metrics) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		m.SetClusterReplicasLive(len(r.node.Replicas()))
		unowned := 0
		if !r.node.Valid() {
			gctx, cancel := context.WithTimeout(ctx, time.Second)
			if groups, err := coord.Groups(gctx); err == nil {
				unowned = len(groups.Groups)
			}
			cancel()
		}
		m.SetClusterGroupsUnowned(unowned)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.node.Changes():
		}
	}
}
