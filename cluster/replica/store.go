package replica

import (
	"context"
	"errors"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/persistence"
)

// auditPruner is a store that enforces audit retention.
type auditPruner interface {
	PruneAudit(ctx context.Context, retention persistence.AuditRetention, now time.Time) (int, error)
}

// WrapStore makes es, the etcd store of this replica, the store the
// placement loop lists streams from, and returns it wrapped so that every
// write etcd refuses (the owner key is gone) stops that stream's actors.
func (r *Runner) WrapStore(es interface {
	persistence.Store
	streamKeys
}) persistence.Store {
	r.keys = es
	return &fencedStore{Store: es, refused: r.refusedWrite}
}

// SetCredible sets the check of a request's credentials that routing
// applies before it costs an etcd read (nil: every request may be good).
// Call it before the front routes to r.
func (r *Runner) SetCredible(credible func(*http.Request) bool) { r.credible = credible }

// EtcdClient is the etcd client of this replica, closed by Close.
func (r *Runner) EtcdClient() *clientv3.Client { return r.cli }

// Node is the cluster node of this replica.
func (r *Runner) Node() *cluster.Node { return r.node }

// Ready is the cluster's part of /readyz: this replica's lease is
// certain.
func (r *Runner) Ready(context.Context) error {
	if !r.node.Valid() {
		return errors.New("cluster: this replica's etcd lease is not certain")
	}
	return nil
}

// StoreFence is the etcd store's fence of node's claims: a stream's record
// and all its groups are one placement unit, the stream's.
func StoreFence(node *cluster.Node) func(unit string) (ownerKey string, createRevision int64, ok bool) {
	return func(unit string) (string, int64, bool) {
		prefix, ok := unitStream(unit)
		if !ok {
			return "", 0, false
		}
		f, ok := node.FenceOf(streamUnit(prefix))
		return f.Key, f.CreateRevision, ok
	}
}

// fencedStore is the etcd store of a replica: it tells the replica of
// every write etcd refused because the stream's owner key is gone, so
// that the stream's actors stop at the first refused write.
type fencedStore struct {
	persistence.Store
	refused func(prefix string)
}

func (s *fencedStore) check(prefix string, err error) {
	if errors.Is(err, persistence.ErrNotOwner) {
		s.refused(prefix)
	}
}

func (s *fencedStore) SaveStream(ctx context.Context, rec persistence.StreamRecord, expected uint64) (uint64, error) {
	rev, err := s.Store.SaveStream(ctx, rec, expected)
	s.check(rec.StreamPrefix, err)
	return rev, err
}

func (s *fencedStore) DeleteStream(ctx context.Context, streamPrefix string, expected uint64) error {
	err := s.Store.DeleteStream(ctx, streamPrefix, expected)
	s.check(streamPrefix, err)
	return err
}

func (s *fencedStore) SaveGroup(ctx context.Context, g *assign.Group, changes *persistence.Changes, expected uint64) (uint64, error) {
	rev, err := s.Store.SaveGroup(ctx, g, changes, expected)
	s.check(g.StreamPrefix, err)
	return rev, err
}

func (s *fencedStore) DeleteGroup(ctx context.Context, streamPrefix, name string, expected uint64) error {
	err := s.Store.DeleteGroup(ctx, streamPrefix, name, expected)
	s.check(streamPrefix, err)
	return err
}

// PruneAudit enforces audit retention on the wrapped store.
func (s *fencedStore) PruneAudit(ctx context.Context, retention persistence.AuditRetention, now time.Time) (int, error) {
	p, ok := s.Store.(auditPruner)
	if !ok {
		return 0, nil
	}
	return p.PruneAudit(ctx, retention, now)
}
