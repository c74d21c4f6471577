package cluster

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// mirror keeps an in-memory copy of every key under one etcd prefix: a
// listing, then a watch from the revision after it; when the watch breaks
// (compaction, lost connection) it lists again. One goroutine owns the
// loop; readers take a copy under mu.
type mirror struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger
	// changed receives a token (never blocking: capacity 1) after every
	// change of the copy.
	changed chan struct{}
	// applied, when set, runs after every change of the copy, before
	// changed is signalled.
	applied func()

	mu      sync.RWMutex
	values  map[string][]byte // key without prefix → value; guarded by mu
	created map[string]int64  // key without prefix → its create revision; guarded by mu
	rev     int64             // the etcd revision the copy is at; guarded by mu
	synced  bool              // a listing has been applied; guarded by mu
}

func newMirror(cli *clientv3.Client, prefix string, log *slog.Logger) *mirror {
	return &mirror{cli: cli, prefix: prefix, log: log, changed: make(chan struct{}, 1),
		values: map[string][]byte{}, created: map[string]int64{}}
}

// createdAt returns the revision the copy is at and a copy of each key's
// create revision.
func (m *mirror) createdAt() (int64, map[string]int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rev, maps.Clone(m.created)
}

// snapshot returns a copy of the mirrored keys (without the prefix).
func (m *mirror) snapshot() map[string][]byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.values)
}

func (m *mirror) get(key string) ([]byte, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.values[key]
	return v, ok
}

func (m *mirror) notify() {
	if m.applied != nil {
		m.applied()
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// list replaces the copy with a fresh listing and returns its revision.
func (m *mirror) list(ctx context.Context) (int64, error) {
	resp, err := m.cli.Get(ctx, m.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	values := make(map[string][]byte, len(resp.Kvs))
	created := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		k := string(kv.Key[len(m.prefix):])
		values[k], created[k] = kv.Value, kv.CreateRevision
	}
	m.mu.Lock()
	m.values, m.created, m.rev, m.synced = values, created, resp.Header.Revision, true
	m.mu.Unlock()
	m.notify()
	return resp.Header.Revision, nil
}

// run lists and watches until ctx ends.
func (m *mirror) run(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		if rev == 0 {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := m.list(lctx)
			cancel()
			if err != nil {
				m.log.Warn("list failed", "prefix", m.prefix, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			rev = r
		}
		// RequireLeader: a watch on a member cut from its quorum would
		// otherwise stay silent instead of failing over.
		wch := m.cli.Watch(clientv3.WithRequireLeader(ctx), m.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				m.log.Warn("watch broke, listing again", "prefix", m.prefix, "err", err)
				break
			}
			m.mu.Lock()
			for _, ev := range resp.Events {
				k := string(ev.Kv.Key[len(m.prefix):])
				if ev.Type == clientv3.EventTypeDelete {
					delete(m.values, k)
					delete(m.created, k)
				} else {
					m.values[k], m.created[k] = ev.Kv.Value, ev.Kv.CreateRevision
				}
			}
			// The copy holds every event up to the last one applied, not up
			// to the header's revision: a watch catching up sends a long
			// history in batches, each under the current revision.
			for _, ev := range resp.Events {
				m.rev = max(m.rev, ev.Kv.ModRevision)
			}
			if resp.IsProgressNotify() {
				m.rev = max(m.rev, resp.Header.Revision)
			}
			m.mu.Unlock()
			m.notify()
		}
		rev = 0 // the watch ended: list again
	}
}
