package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdOptions configure [OpenEtcd].
type EtcdOptions struct {
	// Client is the etcd client. The store does not close it: the caller
	// closes it after the store.
	Client *clientv3.Client
	// Prefix is put before every key of the store, so that one etcd cluster
	// can hold several coordinator clusters and other data. Required; it
	// should end in "/" (e.g. "/rscoord/data/").
	Prefix string
	// Fence, when set, guards every write of a unit's records (a group, a
	// stream record): it returns the owner key of unit and the revision
	// that created it, as held by this replica, and the commit is an etcd
	// transaction conditioned on that key still having that create
	// revision. ok false refuses the write at once. Either refusal is
	// [ErrNotOwner], with nothing written. Units are named by [GroupUnit]
	// and [StreamUnit]. Without Fence, writes are unconditioned: one
	// process must be the only writer.
	Fence func(unit string) (ownerKey string, createRevision int64, ok bool)
	// Timeout bounds each etcd request. Default 5 s.
	Timeout time.Duration
	// Logger; default slog.Default.
	Logger *slog.Logger
}

// GroupUnit is the placement unit of a consumer group's records.
func GroupUnit(streamPrefix, group string) string { return "group/" + streamPrefix + "/" + group }

// StreamUnit is the placement unit of a stream's record and migration work.
func StreamUnit(streamPrefix string) string { return "stream/" + streamPrefix }

// EtcdStore is a [Store] on an etcd cluster: records live as etcd keys in
// the same checksummed, versioned envelopes as in Pebble, and every commit
// is one etcd transaction (acknowledged by a quorum, fsynced by each member
// before it answers). With [EtcdOptions.Fence], several replicas share one
// store, each writing only the units it owns.
type EtcdStore struct {
	*core
	etcd *etcdKV
}

var _ Store = (*EtcdStore)(nil)

// OpenEtcd opens the store under opts.Prefix, marking a new one with the
// key layout and refusing one written with another ([ErrUnknownSchema]).
func OpenEtcd(ctx context.Context, opts EtcdOptions) (*EtcdStore, error) {
	if opts.Client == nil {
		return nil, errors.New("persistence: etcd store without a client")
	}
	if opts.Prefix == "" {
		return nil, errors.New("persistence: etcd store without a key prefix")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &etcdKV{opts: opts}
	c := newCore(e)
	// Every etcd answer carries the cluster's revision; raising the store's
	// counter to it before a write keeps revisions growing across replicas:
	// a record written by another replica (or deleted and created again)
	// had a revision at most the etcd revision of that write, which any
	// later answer here exceeds.
	e.observe = c.observeRevision
	c.shared = opts.Fence != nil
	if err := c.open(ctx); err != nil {
		return nil, opErr("open etcd store "+opts.Prefix, err)
	}
	return &EtcdStore{core: c, etcd: e}, nil
}

// etcdKV is the kv of an etcd key prefix.
type etcdKV struct {
	opts    EtcdOptions
	observe func(uint64) // raises the store's revision counter
}

// ErrNotOwner: a fenced write was refused because this replica does not
// hold (or no longer holds) the unit's owner key. Nothing was written; the
// store stays usable for the units it does own.
var ErrNotOwner = errors.New("persistence: not the owner of the unit")

// errRefused marks a commit that etcd certainly did not apply.
type errRefused struct{ err error }

func (e *errRefused) Error() string { return e.err.Error() }
func (e *errRefused) Unwrap() error { return e.err }

func (e *etcdKV) key(k []byte) string { return e.opts.Prefix + string(k) }

func (e *etcdKV) seen(h interface{ GetRevision() int64 }) {
	if r := h.GetRevision(); r > 0 {
		e.observe(uint64(r))
	}
}

func (e *etcdKV) get(ctx context.Context, key []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	resp, err := e.opts.Client.Get(ctx, e.key(key))
	if err != nil {
		return nil, fmt.Errorf("etcd get: %w", err)
	}
	e.seen(resp.Header)
	if len(resp.Kvs) == 0 {
		return nil, errNoKey
	}
	return resp.Kvs[0].Value, nil // a fresh slice from the response
}

// scanPage is how many keys one range request reads; later pages read at
// the revision of the first, so a scan is one point in time.
const scanPage = 256

func (e *etcdKV) scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	return e.scanOrdered(ctx, lower, upper, false, fn)
}

func (e *etcdKV) scanReverse(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	return e.scanOrdered(ctx, lower, upper, true, fn)
}

func (e *etcdKV) scanOrdered(ctx context.Context, lower, upper []byte, reverse bool, fn func(key, value []byte) error) error {
	from, to := e.key(lower), e.key(upper)
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(to), clientv3.WithLimit(scanPage)}
		if reverse {
			opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		} else {
			opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
		resp, err := e.opts.Client.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return fmt.Errorf("etcd range: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
			e.seen(resp.Header)
		}
		for _, kv := range resp.Kvs {
			k, ok := bytes.CutPrefix(kv.Key, []byte(e.opts.Prefix))
			if !ok {
				return newErr(ErrCorrupt, "etcd key %q outside the prefix %q", kv.Key, e.opts.Prefix)
			}
			if err := fn(k, kv.Value); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		last := string(resp.Kvs[len(resp.Kvs)-1].Key)
		if reverse {
			to = last // the range end is exclusive
		} else {
			from = last + "\x00"
		}
	}
}

// commit runs ops as one etcd transaction. Its conditions: the fence of
// every unit the ops write (when fencing is on), and that audit entries
// and API tokens are new (two replicas may pick one sequence, or create
// one token name; the loser is refused, not overwriting). A refused
// condition is errRefused (nothing applied); any other error leaves the
// outcome unknown.
func (e *etcdKV) commit(ctx context.Context, ops []op) error {
	var cmps []clientv3.Cmp
	units := map[string]bool{}
	thens := make([]clientv3.Op, 0, len(ops))
	for _, o := range ops {
		k := e.key(o.key)
		if o.del {
			thens = append(thens, clientv3.OpDelete(k))
		} else {
			thens = append(thens, clientv3.OpPut(k, string(o.value)))
		}
		if _, ok := parseAuditKey(o.key); ok || isAPITokenKey(o.key) && !o.del {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		}
		if u := unitOfKey(o.key); u != "" && e.opts.Fence != nil && !units[u] {
			units[u] = true
			owner, rev, ok := e.opts.Fence(u)
			if !ok {
				return &errRefused{fmt.Errorf("%w: %s", ErrNotOwner, u)}
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(owner), "=", rev))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	resp, err := e.opts.Client.Txn(ctx).If(cmps...).Then(thens...).Commit()
	if err != nil {
		return fmt.Errorf("etcd txn: %w", err)
	}
	e.seen(resp.Header)
	if !resp.Succeeded {
		if len(units) > 0 {
			names := make([]string, 0, len(units))
			for u := range units {
				names = append(names, u)
			}
			return &errRefused{fmt.Errorf("%w: %s (owner key gone or claimed anew)", ErrNotOwner, strings.Join(names, ", "))}
		}
		return &errRefused{newErr(ErrStaleRevision, "audit sequence or API token name taken by another writer")}
	}
	return nil
}

// limits: etcd's defaults allow 128 ops per transaction list and 1.5 MiB
// per request; a little is left for the conditions and the envelope.
func (e *etcdKV) limits() kvLimits { return kvLimits{MaxOps: 120, MaxBytes: 1 << 20} }

// close does nothing: the client belongs to the caller.
func (e *etcdKV) close() error { return nil }

// unitOfKey is the placement unit whose owner may write key: a group's for
// the keys of that group, a stream's for its record, "" for keys any
// replica may write (audit entries, the layout marker).
func unitOfKey(k []byte) string {
	if prefix, name, _, ok := parseGroupSpaceKey(k); ok {
		return GroupUnit(prefix, name)
	}
	if prefix, name, _, ok := parseStageKey(k); ok {
		return GroupUnit(prefix, name)
	}
	if prefix, ok := parseStreamKey(k); ok {
		return StreamUnit(prefix)
	}
	return ""
}

// StreamPrefixes lists the prefixes of every stored stream, reading their
// keys only: for the cluster mode's once-a-second gauges, which need to
// know which streams exist, not what they hold.
func (s *EtcdStore) StreamPrefixes(ctx context.Context) ([]string, error) {
	e := s.etcd
	lower, upper := streamBounds()
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	resp, err := e.opts.Client.Get(ctx, e.key(lower), clientv3.WithRange(e.key(upper)), clientv3.WithKeysOnly())
	if err != nil {
		return nil, opErr("list stream keys", fmt.Errorf("etcd range: %w", err))
	}
	e.seen(resp.Header)
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		k, _ := bytes.CutPrefix(kv.Key, []byte(e.opts.Prefix))
		if prefix, ok := parseStreamKey(k); ok && prefix != "" {
			out = append(out, prefix)
		}
	}
	return out, nil
}
