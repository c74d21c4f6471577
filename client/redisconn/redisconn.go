// Package redisconn turns a Redis address as an operator writes it into a
// go-redis client, so that the coordinator, the sample pods and programs
// embedding the member runtime or the producer take Redis the same way:
//
//   - host:port, or several comma-separated for the seeds of a Redis
//     Cluster; user and password (if any) come from [Config];
//   - a URL, redis://[user:password@]host:port[/db] or rediss://… for TLS,
//     parsed by redis.ParseURL; a cluster URL names further seeds with
//     addr= query parameters (redis.ParseClusterURL), e.g.
//     rediss://user:pw@10.0.0.1:7001?addr=10.0.0.2:7001&addr=10.0.0.3:7001.
//
// [Config.CAFile] verifies a rediss:// server against a private CA, and
// [Config.NATMap] maps the addresses Redis Cluster nodes announce (in
// CLUSTER SLOTS and MOVED answers) to the addresses this process can reach,
// for a cluster behind NAT or a port-forward.
package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is how to reach Redis beyond the address. The zero value is
// go-redis's defaults without credentials.
type Config struct {
	// Username and Password authenticate a host:port spec, and a URL that
	// carries none of its own. The password must not go on a command line.
	Username, Password string
	// CAFile is a PEM file of the certificate authorities that sign the
	// server certificates of a rediss:// URL (default: the system's). It
	// needs a rediss:// spec: a plain connection has nothing to verify.
	CAFile string
	// NATMap maps announced cluster node addresses to reachable ones. A
	// non-empty map makes the spec a Redis Cluster even with one seed.
	NATMap NATMap
	// DialTimeout, ReadTimeout and WriteTimeout bound one connection
	// attempt and one command's I/O (0: go-redis's defaults).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// MaxRetries is how often a failed command is retried (0: go-redis's
	// default; -1: never).
	MaxRetries int
}

// Open returns a client for spec: a *redis.Client for one host:port or a
// URL without addr= seeds, a *redis.ClusterClient for several host:port
// seeds, a cluster URL, or any spec with a NAT map. The caller closes it.
func Open(spec string, cfg Config) (redis.UniversalClient, error) {
	spec = strings.TrimSpace(spec)
	isURL := strings.HasPrefix(spec, "redis://") || strings.HasPrefix(spec, "rediss://")
	if !isURL && strings.Contains(spec, "://") {
		return nil, fmt.Errorf("redis %q: want host:port, redis://… or rediss://…", spec)
	}
	if cfg.CAFile != "" && !strings.HasPrefix(spec, "rediss://") {
		return nil, errors.New("a CA file needs a rediss:// (TLS) Redis URL")
	}
	var roots *x509.CertPool
	if cfg.CAFile != "" {
		var err error
		if roots, err = loadCAFile(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	cluster := len(cfg.NATMap) > 0
	if isURL {
		if cluster || strings.Contains(spec, "addr=") {
			opts, err := redis.ParseClusterURL(spec)
			if err != nil {
				return nil, fmt.Errorf("redis cluster URL: %w", err)
			}
			fillCredentials(&opts.Username, &opts.Password, cfg)
			setRoots(opts.TLSConfig, roots)
			return newCluster(opts, cfg), nil
		}
		opts, err := redis.ParseURL(spec)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		fillCredentials(&opts.Username, &opts.Password, cfg)
		setRoots(opts.TLSConfig, roots)
		return newClient(opts, cfg), nil
	}
	var addrs []string
	for _, a := range strings.Split(spec, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	switch {
	case len(addrs) == 0:
		return nil, errors.New("redis: no address")
	case len(addrs) == 1 && !cluster:
		return newClient(&redis.Options{Addr: addrs[0], Username: cfg.Username, Password: cfg.Password}, cfg), nil
	default:
		return newCluster(&redis.ClusterOptions{Addrs: addrs, Username: cfg.Username, Password: cfg.Password}, cfg), nil
	}
}

// fillCredentials gives a URL without credentials those of cfg.
func fillCredentials(user, password *string, cfg Config) {
	if *user == "" && *password == "" {
		*user, *password = cfg.Username, cfg.Password
	}
}

// setRoots makes TLS verify against roots, when both are set.
func setRoots(t *tls.Config, roots *x509.CertPool) {
	if t != nil && roots != nil {
		t.RootCAs = roots
	}
}

func newClient(opts *redis.Options, cfg Config) *redis.Client {
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = orDefault(opts.DialTimeout, cfg.DialTimeout),
		orDefault(opts.ReadTimeout, cfg.ReadTimeout), orDefault(opts.WriteTimeout, cfg.WriteTimeout)
	if cfg.MaxRetries != 0 {
		opts.MaxRetries = cfg.MaxRetries
	}
	return redis.NewClient(opts)
}

func newCluster(opts *redis.ClusterOptions, cfg Config) *redis.ClusterClient {
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = orDefault(opts.DialTimeout, cfg.DialTimeout),
		orDefault(opts.ReadTimeout, cfg.ReadTimeout), orDefault(opts.WriteTimeout, cfg.WriteTimeout)
	if cfg.MaxRetries != 0 {
		opts.MaxRetries = cfg.MaxRetries
	}
	cfg.NATMap.Apply(opts)
	return redis.NewClusterClient(opts)
}

// orDefault is set unless it is 0, then override.
func orDefault(set, override time.Duration) time.Duration {
	if set != 0 || override == 0 {
		return set
	}
	return override
}

// loadCAFile reads a PEM bundle of CA certificates.
func loadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("redis CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("redis CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}
