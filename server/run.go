package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/cluster/replica"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/redisops"
)

// run is one life of the coordinator: until the server closes or, in the
// cluster mode, the replica's lease is lost (its ctx then ends with a
// cause wrapping cluster.ErrLeaseLost).
type run struct {
	ctx     context.Context
	store   persistence.Store
	coord   *actors.Coordinator
	authn   *auth.Authenticator
	metrics *metrics.Metrics
	handler http.Handler
	// lease is the cluster mode's etcd lease of this run.
	lease clientv3.LeaseID
	// memory reads shard memory for the collector; nil without --redis.
	memory collector.Memory
	// history keeps the collector's recent samples for the console.
	history *collector.History

	closers closers
	// release, when set, ends the run's context after its close.
	release func()
}

// closers is a stack of closers: each resource pushes its closer as it
// opens, and close runs them in reverse order, once.
type closers struct {
	fns  []func(context.Context) error
	once sync.Once
	err  error
}

func (c *closers) push(fn func(context.Context) error) { c.fns = append(c.fns, fn) }

// close runs every closer, the last pushed first, and joins their errors;
// later calls return the first call's error.
func (c *closers) close(ctx context.Context) error {
	c.once.Do(func() {
		var errs []error
		for i := len(c.fns) - 1; i >= 0; i-- {
			errs = append(errs, c.fns[i](ctx))
		}
		c.err = errors.Join(errs...)
	})
	return c.err
}

func (r *run) close(ctx context.Context) error {
	err := r.closers.close(ctx)
	if r.release != nil {
		r.release()
	}
	return err
}

// openRun opens one life of the coordinator, pushing every closer on the
// run's stack so that the shutdown order is the reverse of the opening
// one: begin the shutdown, leave the cluster, stop collecting, stop HTTP,
// close the coordinator, Redis, the store, the authenticator and last the
// etcd client. On an error everything opened so far is closed.
func (s *Server) openRun(parent context.Context) (_ *run, err error) {
	cfg, log := &s.cfg, s.log
	ctx, stop := context.WithCancelCause(parent)
	r := &run{ctx: ctx}
	r.closers.push(func(context.Context) error { stop(nil); return nil })
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close(context.Background()))
		}
	}()

	var rep *replica.Runner
	// tokens keeps the API tokens: the engine itself, not the cluster
	// mode's fenced wrapper (token records belong to no unit).
	var tokens persistence.APITokens
	if cfg.Cluster != nil {
		var es *persistence.EtcdStore
		if rep, es, err = s.join(ctx, cfg.Group.MemberLease); err != nil {
			return nil, err
		}
		tokens = es
		// Last, after the store (and the revocations' watch) closed: the
		// etcd client. It also leaves the cluster on the error paths.
		r.closers.push(func(context.Context) error { return rep.Close(context.Background()) })
		// A replica whose lease is lost stops: its writes are refused
		// already, and the next run joins as a stand-by.
		go func() {
			select {
			case <-rep.Node().Done():
				log.Error("replica lease lost: stopping")
				stop(cluster.ErrLeaseLost)
			case <-ctx.Done():
			}
		}()
		r.store, r.lease = rep.WrapStore(es), rep.Node().Lease()
	} else {
		ps, err := persistence.OpenPebble(cfg.DataDir, persistence.Options{Logger: log, AcceptWALLoss: cfg.AcceptWALLoss})
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		r.store, tokens = ps, ps
	}
	// The authenticator closes after the store, as it always has: its
	// slot is taken before the store's closer is pushed.
	var closeAuth func() error
	r.closers.push(func(context.Context) error {
		if closeAuth == nil {
			return nil
		}
		return closeAuth()
	})
	store := r.store
	r.closers.push(func(context.Context) error { return CloseStore(store, storeCloseTimeout) })
	var cli *clientv3.Client
	if rep != nil {
		cli = rep.EtcdClient()
	}
	if r.authn, closeAuth, err = cfg.openAuthenticator(ctx, log, cli, apiTokens{tokens}); err != nil {
		return nil, err
	}

	streamRedis := cfg.StreamRedis
	if streamRedis == nil && len(cfg.Redis) > 0 {
		rdb, err := cfg.openRedis()
		if err != nil {
			return nil, err
		}
		ops := redisops.Wrap(rdb)
		r.closers.push(func(context.Context) error { return ops.Close() })
		r.memory = collector.RedisMemory(rdb)
		streamRedis = ops
		_, isCluster := rdb.(*redis.ClusterClient)
		log.Info("redis configured", slog.Any("addresses", redactRedis(cfg.Redis)), slog.Bool("cluster", isCluster),
			slog.Duration("producerRoutingLease", cfg.ProducerRoutingLease), slog.Duration("drainCheckInterval", cfg.DrainCheckInterval),
			slog.Bool("retireRemovedShards", cfg.RetireRemovedShards))
	} else if streamRedis == nil {
		log.Warn("no --redis: scales skip stream provisioning and drain proofs; removed shards wait for an operator")
	}

	var shardMemory actors.ShardMemory
	if r.memory != nil {
		shardMemory = r.memory
	}
	metricOpts := []metrics.Option{metrics.WithVersion(cfg.Version), metrics.WithMaxMembers(cfg.MetricsMaxMembers)}
	if cfg.ReferenceMetrics {
		metricOpts = append(metricOpts, metrics.WithReferenceFamilies(cfg.coordinatorLabel()))
	}
	r.metrics = metrics.New(metricOpts...)
	r.coord, err = actors.Start(ctx, actors.Config{
		Redis:                             streamRedis,
		ShardMemory:                       shardMemory,
		ProducerRoutingLease:              cfg.ProducerRoutingLease,
		DrainCheckInterval:                cfg.DrainCheckInterval,
		RetireRemovedShards:               cfg.RetireRemovedShards,
		AutoscaleInterval:                 cfg.AutoscaleInterval,
		MaxShards:                         cfg.MaxShards,
		MaxHeldHeartbeats:                 cfg.HeldCap(log),
		Store:                             r.store,
		Group:                             cfg.Group,
		DefaultShards:                     cfg.DefaultShards,
		AutoCreateGroups:                  cfg.AutoCreateGroups,
		MaxGroupsPerStream:                cfg.MaxGroupsPerStream,
		MaxGroupRegistrationsPerPrincipal: cfg.MaxGroupRegistrationsPerPrincipal,
		Logger:                            log,
		Now:                               cfg.Now,
		Observer:                          r.metrics,
		Placed:                            rep != nil,
	})
	if err != nil {
		return nil, err
	}
	coord := r.coord
	r.closers.push(coord.Close)

	gw := cfg.Gateway
	gw.Logger, gw.Auth, gw.Metrics, gw.APITokens = log, r.authn, r.metrics, apiTokens{tokens}
	r.history = collector.NewHistory(cfg.MetricsInterval, 0)
	gw.History = r.history
	// Without credentials a loopback server is reached only by local
	// clients, and through DNS rebinding by any web page its user opens:
	// then Host names the page's own domain.
	gw.LocalHostsOnly = gw.LocalHostsOnly || !cfg.AnyHost && (r.authn == nil || gw.NoMemberAuth) && listensOnLoopback(cfg.Listen)
	if rep != nil {
		gw.Ready, gw.Cluster = rep.Ready, rep.View
	}
	r.handler = gateway.New(r.coord, gw)
	detach := func() {}

	if rep == nil {
		s.startHTTP(r.handler)
		r.metrics.SetConnectionSource(s.http)
		r.closers.push(s.shutdownHTTP)
		log.Info("rscoord listening", slog.String("address", s.ln.Addr().String()), slog.String("dataDir", cfg.DataDir))
	} else {
		forwarded := prometheus.NewCounter(prometheus.CounterOpts{Name: "rscoord_cluster_forwarded_requests_total",
			Help: "Requests this replica answered that another replica forwarded (cluster mode)."})
		if err := errors.Join(r.metrics.Registry().Register(forwarded), rep.Place(ctx, coord, r.store, r.metrics)); err != nil {
			return nil, err
		}
		// The listener stays when this run ends: from then on it forwards
		// or answers RETRY.
		r.closers.push(s.front.ServeOwner(r.handler, forwarded))
		r.metrics.SetConnectionSource(s.http)
		rep.SetCredible(credentialCheck{authn: r.authn, memberAuth: !gw.NoMemberAuth}.credible)
		detach = s.front.Attach(rep)
		log.Info("rscoord listening", slog.String("address", cfg.Listen), slog.String("replica", rep.Node().Self().ID))
	}
	s.background(r)
	if rep != nil {
		// Owner keys first: the next replica takes over while this one
		// drains its requests (answered RETRY / 503 from now on). The etcd
		// client is closed last, after the actors and the store: their
		// last writes and reads are answered, not cut off with an unknown
		// outcome.
		r.closers.push(func(ctx context.Context) error { err := rep.Leave(ctx); detach(); return err })
	}
	r.closers.push(func(context.Context) error { coord.BeginShutdown(); return nil })
	return r, nil
}

// background starts audit pruning and the metrics collector of r, and
// pushes their stop.
func (s *Server) background(r *run) {
	ctx, stop := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.cfg.pruneAudit(ctx, r.store, s.log) })
	collected := make(chan error, 1)
	wg.Go(func() {
		collected <- collector.Run(ctx, collector.Config{
			Source: r.coord, Sink: r.metrics, Memory: r.memory, History: r.history,
			Interval: s.cfg.MetricsInterval, Timeout: s.cfg.MetricsTimeout, Logger: s.log})
	})
	r.closers.push(func(context.Context) error {
		stop()
		wg.Wait()
		<-collected // validated with the configuration: it ends only when told to
		return nil
	})
}

// listensOnLoopback reports whether the listen address addr names a
// loopback address or localhost; ":8080" and 0.0.0.0 do not.
func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && gateway.IsLocalHost(host)
}
