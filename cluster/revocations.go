package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Revocations keeps the tokens revoked by logout in etcd, under
// <etcd prefix>revoked-tokens/<token id>, so that every replica refuses a
// token revoked through any of them, also after a failover. Each key holds
// the token's expiry (unix seconds) and is bound to an etcd lease that
// outlives the token by a minute, so etcd forgets it once it no longer
// matters. A revocation adds a key and never changes one: it needs no
// fence, and a deposed owner that still records one does no harm.
type Revocations struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger
}

// Rememberer takes the revocations read from etcd (auth.Revocations).
type Rememberer interface {
	Remember(id string, exp time.Time)
}

// NewRevocations keeps the revocations of the coordinator cluster under
// root (its etcd prefix) through cli.
func NewRevocations(cli *clientv3.Client, root string, log *slog.Logger) *Revocations {
	return &Revocations{cli: cli, prefix: root + revokedTokensDir, log: log}
}

// revokedTokensDir is the key space of revocations under the etcd prefix.
const revokedTokensDir = "revoked-tokens/"

// Put stores a revocation under a lease that ends a minute after exp.
func (e *Revocations) Put(ctx context.Context, id string, exp time.Time) error {
	ttl := int64(time.Until(exp)/time.Second) + 60
	lease, err := e.cli.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("etcd lease for a revoked token: %w", err)
	}
	if _, err := e.cli.Put(ctx, e.prefix+id, strconv.FormatInt(exp.Unix(), 10), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("etcd put of a revoked token: %w", err)
	}
	return nil
}

// Load remembers every stored revocation in r and returns the etcd
// revision it read at.
func (e *Revocations) Load(ctx context.Context, r Rememberer) (int64, error) {
	resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("load revoked tokens from etcd: %w", err)
	}
	for _, kv := range resp.Kvs {
		e.remember(r, string(kv.Key), kv.Value)
	}
	return resp.Header.Revision, nil
}

func (e *Revocations) remember(r Rememberer, key string, value []byte) {
	unix, err := strconv.ParseInt(string(value), 10, 64)
	id := strings.TrimPrefix(key, e.prefix)
	if err != nil || id == "" {
		e.log.Warn("ignoring an etcd key of revoked tokens that this build did not write", slog.String("key", key))
		return
	}
	r.Remember(id, time.Unix(unix, 0))
}

// Follow remembers in r the revocations other replicas store after
// revision rev, until ctx ends. When the watch breaks (etcd compacted past
// it, or lost quorum) it loads everything again and watches from there.
func (e *Revocations) Follow(ctx context.Context, r Rememberer, rev int64) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range e.cli.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					e.log.Warn("watch of revoked tokens broke; loading them again", slog.Any("error", err))
				}
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					e.remember(r, string(ev.Kv.Key), ev.Kv.Value)
				}
			}
			rev = resp.Header.Revision
		}
		cancel()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			next, err := e.Load(lctx, r)
			cancel()
			if err == nil {
				rev = next
				break
			}
			if !errors.Is(err, context.Canceled) {
				e.log.Warn("loading revoked tokens again", slog.Any("error", err))
			}
		}
	}
}
