package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/persistence"
)

// settingMemberLease names the member lease among the settings every
// replica of a cluster shares (cluster.Options.Settings).
const settingMemberLease = "member-lease"

// endpointScheme is the scheme of an etcd endpoint URL, lower-cased; ""
// for a bare host:port.
func endpointScheme(ep string) string {
	scheme, _, ok := strings.Cut(ep, "://")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// envEtcdPassword holds the etcd password: secrets stay off the command
// line.
const envEtcdPassword = "RSCOORD_ETCD_PASSWORD"

// StoreFlags choose and configure the store.
type StoreFlags struct {
	Store         string        `default:"pebble" enum:"pebble,etcd" env:"RSCOORD_STORE" help:"Store engine: pebble (embedded, one process) or etcd (the cluster mode: several replicas share one etcd cluster)."`
	EtcdEndpoints []string      `placeholder:"URL" sep:"," env:"RSCOORD_ETCD_ENDPOINTS" help:"etcd client URLs (--store etcd); list every member, so losing one does not matter."`
	EtcdPrefix    string        `default:"/rscoord/" env:"RSCOORD_ETCD_PREFIX" help:"Key prefix of this coordinator cluster in etcd; every replica of one cluster uses the same."`
	EtcdUsername  string        `env:"RSCOORD_ETCD_USERNAME" help:"etcd user (its password comes from RSCOORD_ETCD_PASSWORD)."`
	EtcdCA        string        `placeholder:"FILE" env:"RSCOORD_ETCD_CA" help:"PEM CA bundle that signs the etcd servers' certificates (turns TLS on; endpoints must then be https://)."`
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
	if f.EtcdCA != "" || f.EtcdCert != "" {
		// The etcd client speaks clear text to an http:// (or unix://)
		// endpoint whatever its TLS configuration says: the CA would be
		// checked nowhere, and the etcd password would cross in clear.
		for _, ep := range f.EtcdEndpoints {
			if s := endpointScheme(ep); s == "http" || s == "unix" {
				errs = append(errs, fmt.Errorf("--etcd-ca and --etcd-cert turn TLS on, but endpoint %q is clear text: give it as https://", ep))
			}
		}
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

// openStore opens the store the flags name. With --store etcd it first
// joins the cluster; the store's writes of a stream and its groups are
// then fenced by the owner key of the stream's placement unit, which the
// replica claims later (placement.go).
func (s *ServeCmd) openStore(ctx context.Context, log *slog.Logger, f *front) (store persistence.Store, rep *replica, err error) {
	if s.Store != "etcd" {
		ps, err := persistence.OpenPebble(s.DataDir, persistence.Options{Logger: log})
		return ps, nil, err
	}
	if s.EtcdUsername != "" {
		for _, ep := range s.EtcdEndpoints {
			if endpointScheme(ep) == "http" {
				log.Warn("the etcd password crosses the network in clear text: give the etcd endpoints as https:// (--etcd-ca)",
					slog.String("endpoint", ep))
				break
			}
		}
	}
	cli, err := s.etcdClient()
	if err != nil {
		return nil, nil, err
	}
	id := s.replicaID()
	// A replica restarted at once (by a supervisor) finds its previous
	// incarnation still registered until that one's lease lapses: it waits
	// for that rather than failing. A live replica with the same id is
	// still refused after the wait.
	var node *cluster.Node
	for waitUntil := time.Now().Add(2*s.EtcdLeaseTTL + 2*time.Second); ; {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		node, err = cluster.Join(jctx, cluster.Options{
			Client: cli, Root: s.EtcdPrefix, ID: id, AdvertiseURL: s.AdvertiseURL, LeaseTTL: s.EtcdLeaseTTL, Logger: log,
			// A replica that loads a stream gives each member a fresh lease
			// of its own --member-lease, while members read for the lease
			// the previous owner answered: with a shorter one here, a
			// member's shards could be granted before it stops reading.
			Settings: map[string]string{settingMemberLease: s.MemberLease.String()},
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
	rep = newReplica(cli, node, log, f)
	log.Info("joined the coordinator cluster", slog.String("replica", id), slog.String("advertiseUrl", s.AdvertiseURL),
		slog.Duration("leaseTTL", s.EtcdLeaseTTL))
	es, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{
		Client: cli, Prefix: s.EtcdPrefix + "data/", Logger: log,
		Fence: storeFence(node),
	})
	if err != nil {
		return nil, nil, errors.Join(err, rep.close(context.Background()))
	}
	rep.keys = es
	return &fencedStore{Store: es, refused: rep.refusedWrite}, rep, nil
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
// answers through a front that serves the streams this replica runs and
// forwards the others to the replicas that run them.
func (s *ServeCmd) runCluster(ctx context.Context, log *slog.Logger) error {
	var peers *peerKey
	if s.Auth {
		// Every replica shares the token secret; without a shared one,
		// forwarded client addresses are simply not trusted.
		secret, err := auth.LoadOrCreateSecret(s.DataDir, os.Getenv(envTokenSecret))
		if err != nil {
			return fmt.Errorf("serve: auth: %w", err)
		}
		peers = newPeerKey(secret)
	}
	f := newFront(s.replicaID(), log, assign.Config{
		HeartbeatInterval: s.HeartbeatInterval, MemberLease: s.MemberLease, RebalanceTimeout: s.RebalanceTimeout,
	}, max(2*s.HeartbeatInterval, 5*time.Second), peers)
	f.advertise = strings.TrimSuffix(s.AdvertiseURL, "/")
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("serve: listen on %s: %w", s.Listen, err)
	}
	srv := s.httpServer(f, log)
	f.server = srv
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

// ready is the cluster's part of /readyz: this replica's lease is
// certain.
func (r *replica) ready(context.Context) error {
	if !r.node.Valid() {
		return errors.New("cluster: this replica's etcd lease is not certain")
	}
	return nil
}

// storeFence is the etcd store's fence of node's claims: a stream's record
// and all its groups are one placement unit, the stream's.
func storeFence(node *cluster.Node) func(unit string) (ownerKey string, createRevision int64, ok bool) {
	return func(unit string) (string, int64, bool) {
		prefix, ok := unitStream(unit)
		if !ok {
			return "", 0, false
		}
		f, ok := node.FenceOf(streamUnit(prefix))
		return f.Key, f.CreateRevision, ok
	}
}
