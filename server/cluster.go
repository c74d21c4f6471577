package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/cluster/replica"
	"github.com/rscoord/rscoord/persistence"
)

// settingMemberLease names the member lease among the settings every
// replica of a cluster shares (cluster.Options.Settings).
const settingMemberLease = "member-lease"

// etcdClient dials the etcd cluster with the TLS and user settings.
func (c *ClusterConfig) etcdClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   c.EtcdEndpoints,
		DialTimeout: 5 * time.Second,
		Username:    c.EtcdUsername,
		Password:    c.EtcdPassword,
		Logger:      zap.NewNop(),
	}
	if c.EtcdCA != "" || c.EtcdCert != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.EtcdCA != "" {
			pem, err := os.ReadFile(c.EtcdCA)
			if err != nil {
				return nil, fmt.Errorf("--etcd-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--etcd-ca %s: no PEM certificate", c.EtcdCA)
			}
			t.RootCAs = pool
		}
		if c.EtcdCert != "" {
			cert, err := tls.LoadX509KeyPair(c.EtcdCert, c.EtcdKey)
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

// join joins the coordinator cluster and opens the etcd store, whose
// writes of a stream and its groups are fenced by the owner key of the
// stream's placement unit, which the replica claims later (placement).
// The Runner closes the etcd client; the store must be closed before it.
func (s *Server) join(ctx context.Context, memberLease time.Duration) (*replica.Runner, *persistence.EtcdStore, error) {
	c, log := s.cfg.Cluster, s.log
	if c.EtcdUsername != "" {
		for _, ep := range c.EtcdEndpoints {
			if endpointScheme(ep) == "http" {
				log.Warn("the etcd password crosses the network in clear text: give the etcd endpoints as https:// (--etcd-ca)",
					slog.String("endpoint", ep))
				break
			}
		}
	}
	cli, err := c.etcdClient()
	if err != nil {
		return nil, nil, err
	}
	id := c.replicaID()
	// A replica restarted at once (by a supervisor) finds its previous
	// incarnation still registered until that one's lease lapses: it waits
	// for that rather than failing. A live replica with the same id is
	// still refused after the wait.
	var node *cluster.Node
	for waitUntil := time.Now().Add(2*c.LeaseTTL + 2*time.Second); ; {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		node, err = cluster.Join(jctx, cluster.Options{
			Client: cli, Root: c.EtcdPrefix, ID: id, AdvertiseURL: c.AdvertiseURL, LeaseTTL: c.LeaseTTL, Logger: log,
			// A replica that loads a stream gives each member a fresh lease
			// of its own member lease, while members read for the lease the
			// previous owner answered: with a shorter one here, a member's
			// shards could be granted before it stops reading.
			Settings: map[string]string{settingMemberLease: memberLease.String()},
			TakeOver: s.takeOver,
		})
		cancel()
		if !errors.Is(err, cluster.ErrDuplicateID) || time.Now().After(waitUntil) || ctx.Err() != nil {
			break
		}
		log.Info("replica id still registered (a previous run whose lease has not lapsed yet): waiting", slog.String("replica", id))
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	if se, ok := errors.AsType[*cluster.SettingError](err); ok && se.Name == settingMemberLease {
		err = fmt.Errorf("--member-lease %s differs from the coordinator cluster's %s (etcd key %s): every replica must use the same member lease, "+
			"or a failover frees shards a member may still read; to change it, stop every replica, wait the old lease, delete that key: %w",
			se.Here, se.Cluster, se.Key, err)
	}
	if err != nil {
		return nil, nil, errors.Join(err, cli.Close())
	}
	rep := replica.NewRunner(cli, node, log, s.front)
	log.Info("joined the coordinator cluster", slog.String("replica", id), slog.String("advertiseUrl", c.AdvertiseURL),
		slog.Duration("leaseTTL", c.LeaseTTL))
	es, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{
		Client: cli, Prefix: c.EtcdPrefix + "data/", Logger: log, Fence: replica.StoreFence(node),
	})
	if err != nil {
		return nil, nil, errors.Join(err, rep.Close(context.Background()))
	}
	return rep, es, nil
}
