package redisconn

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NATMap maps the address a Redis Cluster node announces ("host:port", as
// CLUSTER SLOTS and MOVED answers name it) to the address to connect to.
// Addresses it does not hold are used as announced.
type NATMap map[string]string

// ParseNATMap parses "announced-host:port=connect-host:port,…"; an empty
// string is an empty map. Each side must be a host:port with a port in
// 1..65535, and an announced address may appear once.
func ParseNATMap(s string) (NATMap, error) {
	m := NATMap{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		from, to, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("NAT map entry %q: want announced-host:port=connect-host:port", entry)
		}
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		for _, a := range []string{from, to} {
			if err := checkHostPort(a); err != nil {
				return nil, fmt.Errorf("NAT map entry %q: %w", entry, err)
			}
		}
		if _, dup := m[from]; dup {
			return nil, fmt.Errorf("NAT map: %s is mapped twice", from)
		}
		m[from] = to
	}
	return m, nil
}

// checkHostPort accepts host:port with a non-empty host and a port in
// 1..65535.
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", a, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port must be 1..65535", a)
	}
	return nil
}

// String is the map in ParseNATMap's form, entries sorted.
func (m NATMap) String() string {
	out := make([]string, 0, len(m))
	for from, to := range m {
		out = append(out, from+"="+to)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// Apply makes the cluster client connect to the mapped address of every
// node it learns of (seeds included), while it keeps naming the node by
// its announced address, so slot routing and MOVED redirections work as
// without NAT. The node clients are made by redis.NewClient, as by default.
// An empty map changes nothing.
func (m NATMap) Apply(opts *redis.ClusterOptions) {
	if len(m) == 0 {
		return
	}
	next := opts.NewClient
	if next == nil {
		next = redis.NewClient
	}
	opts.NewClient = func(o *redis.Options) *redis.Client {
		if to, ok := m[o.Addr]; ok {
			o.Addr = to
		}
		return next(o)
	}
}
