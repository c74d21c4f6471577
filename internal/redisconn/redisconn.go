// Package redisconn turns the --redis value of the sample pods into a
// go-redis client, so that both pods take Redis the same way:
//
//   - host:port, or several comma-separated for the seeds of a Redis
//     Cluster; the password (if any) comes from the caller;
//   - a URL, redis://[user:password@]host:port[/db] or rediss://… for TLS,
//     parsed by redis.ParseURL; a cluster URL names further seeds with
//     addr= query parameters (redis.ParseClusterURL), e.g.
//     rediss://user:pw@10.0.0.1:7001?addr=10.0.0.2:7001&addr=10.0.0.3:7001.
package redisconn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Open returns a client for spec. password is used for host:port specs
// only (a URL carries its own); it must not go on a command line.
func Open(spec, password string) (redis.UniversalClient, error) {
	spec = strings.TrimSpace(spec)
	if strings.HasPrefix(spec, "redis://") || strings.HasPrefix(spec, "rediss://") {
		if strings.Contains(spec, "addr=") {
			opts, err := redis.ParseClusterURL(spec)
			if err != nil {
				return nil, fmt.Errorf("redis cluster URL: %w", err)
			}
			return redis.NewClusterClient(opts), nil
		}
		opts, err := redis.ParseURL(spec)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		return redis.NewClient(opts), nil
	}
	if strings.Contains(spec, "://") {
		return nil, fmt.Errorf("redis %q: want host:port, redis://… or rediss://…", spec)
	}
	var addrs []string
	for _, a := range strings.Split(spec, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	switch len(addrs) {
	case 0:
		return nil, errors.New("redis: no address")
	case 1:
		return redis.NewClient(&redis.Options{Addr: addrs[0], Password: password}), nil
	default:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password}), nil
	}
}
