package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults and limits of [Options].
const (
	// DefaultLeaseTTL is the etcd lease of a replica: it must stay well
	// under the member lease (15 s by default) so that a dead replica's
	// groups move before any member fails closed. A failover takes what
	// is left of the dead owner's lease (renewed every third of it), up
	// to half a second more until etcd's lessor notices the expiry, and
	// the new owner's load: 2 s keeps it under 3 s.
	DefaultLeaseTTL = 2 * time.Second
	// MinLeaseTTL is the shortest lease etcd grants reliably.
	MinLeaseTTL = 2 * time.Second
	// DefaultRoot is the etcd key prefix of a coordinator cluster.
	DefaultRoot = "/rscoord/"
)

// Sentinel errors.
var (
	// ErrHeld: another replica holds the owner key of the unit.
	ErrHeld = errors.New("cluster: unit owned by another replica")
	// ErrLeaseLost: this replica's lease lapsed; every owner key it held is
	// gone and it must stop its actors.
	ErrLeaseLost = errors.New("cluster: replica lease lost")
	// ErrDuplicateID: a live replica is registered with the same id.
	ErrDuplicateID = errors.New("cluster: replica id already registered")
	// ErrSettingDiffers: a setting every replica must share
	// ([Options.Settings]) has another value in the cluster; see
	// [SettingError].
	ErrSettingDiffers = errors.New("cluster: setting differs from the cluster's")
)

// SettingError is the refusal of [Join] when [Options.Settings] names a
// value other than the one the cluster recorded. It wraps
// [ErrSettingDiffers].
type SettingError struct {
	// Name is the setting, Here this replica's value, Cluster the value
	// recorded by the replica that first joined, Key the etcd key that
	// holds it.
	Name, Here, Cluster, Key string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("cluster: setting %s is %q here but %q in the cluster (etcd key %s)", e.Name, e.Here, e.Cluster, e.Key)
}

// Unwrap makes the error match [ErrSettingDiffers].
func (e *SettingError) Unwrap() error { return ErrSettingDiffers }

// Options configure [Join].
type Options struct {
	// Client is the etcd client; the caller closes it after Leave.
	Client *clientv3.Client
	// Root is the key prefix of this coordinator cluster; every replica of
	// one cluster uses the same. Default DefaultRoot; must end in "/".
	Root string
	// ID names this replica uniquely among the live ones (e.g. the
	// host name). Required.
	ID string
	// AdvertiseURL is the http(s) URL of this replica's API. Required.
	AdvertiseURL string
	// LeaseTTL is the etcd lease of the replica; it is rounded up to whole
	// seconds. Default DefaultLeaseTTL, at least MinLeaseTTL.
	LeaseTTL time.Duration
	// Settings are values every replica of the cluster must share (name →
	// value; names are key segments without "/"). The first replica to
	// join records each under Root+"settings/" for good; a replica that
	// names another value is refused ([SettingError]) before it
	// registers. A setting is changed by stopping every replica and
	// deleting its key.
	Settings map[string]string
	// Logger; default slog.Default.
	Logger *slog.Logger
	// TakeOver is the lease of this replica's previous registration, one
	// this process gave up (a lost lease, see [Node.Lease]); 0: none. Join
	// revokes it first, so that the registration and the owner keys bound
	// to it go at once rather than when etcd lets the lease lapse, which
	// after etcd regains its quorum is a whole TTL later: the replica
	// serves again as soon as etcd does. Nothing serves from that lease
	// any more: the caller stopped everything the previous node ran.
	TakeOver clientv3.LeaseID
}

// EnsureDefaults fills zero fields.
func (o Options) EnsureDefaults() Options {
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("cluster: no etcd client"))
	}
	if o.ID == "" {
		errs = append(errs, errors.New("cluster: empty replica id"))
	}
	if u, err := url.Parse(o.AdvertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("cluster: advertise URL %q is not an http(s) URL with a host", o.AdvertiseURL))
	}
	if len(o.Root) == 0 || o.Root[len(o.Root)-1] != '/' {
		errs = append(errs, fmt.Errorf("cluster: root %q does not end in /", o.Root))
	}
	if o.LeaseTTL < MinLeaseTTL {
		errs = append(errs, fmt.Errorf("cluster: lease TTL %v below %v", o.LeaseTTL, MinLeaseTTL))
	}
	for name := range o.Settings {
		if name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("cluster: setting name %q is empty or holds a /", name))
		}
	}
	return errors.Join(errs...)
}

// Fence proves ownership of a unit in store writes: the owner key and the
// revision that created it. A new claim of the unit creates the key anew,
// with a higher create revision, so an old fence never matches again.
type Fence struct {
	Key            string
	CreateRevision int64
}

// Cmp is the condition a fenced etcd transaction carries.
func (f Fence) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.CreateRevision)
}

// Node is this replica's membership in the cluster. Safe for concurrent
// use.
type Node struct {
	opts  Options
	cli   *clientv3.Client
	lease clientv3.LeaseID
	self  Replica

	replicas *mirror
	owners   *mirror

	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{} // closed when the lease is lost or Leave ran

	// clock measures the lease: validUntil is a reading of it.
	clock leaseClock

	mu         sync.Mutex
	validUntil time.Duration    // lower bound of the lease's expiry, by clock; 0: none; guarded by mu
	held       map[string]Fence // unit → fence; guarded by mu
	left       bool             // guarded by mu
}

// replicasDir, ownersDir, settingsDir are the key spaces under Root.
func (o Options) replicasDir() string { return o.Root + "replicas/" }
func (o Options) settingsDir() string { return o.Root + "settings/" }
func (o Options) ownersDir() string   { return o.Root + "owners/" }

// ownerValue is what an owner key holds.
type ownerValue struct {
	Replica
}

// Join grants this replica's lease, registers it (refusing an id that a
// live replica uses: [ErrDuplicateID]) and starts watching replicas and
// owner keys. The lease is kept alive until [Node.Leave] or until it
// lapses ([Node.Done]).
func Join(ctx context.Context, opts Options) (*Node, error) {
	return join(ctx, opts, newLeaseClock())
}

// join is Join with the clock that measures the lease.
func join(ctx context.Context, opts Options, clock leaseClock) (*Node, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ttl := int64((opts.LeaseTTL + time.Second - 1) / time.Second)
	opts.LeaseTTL = time.Duration(ttl) * time.Second
	log := opts.Logger.With("replica", opts.ID)
	if err := agree(ctx, opts); err != nil {
		return nil, err
	}
	if opts.TakeOver != 0 {
		if _, err := opts.Client.Revoke(ctx, opts.TakeOver); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, fmt.Errorf("cluster: revoke the previous lease of %s: %w", opts.ID, err)
		}
	}
	start := clock.now()
	grant, err := opts.Client.Grant(ctx, ttl)
	if err != nil {
		return nil, fmt.Errorf("cluster: grant lease: %w", err)
	}
	self := Replica{ID: opts.ID, AdvertiseURL: opts.AdvertiseURL}
	val, err := json.Marshal(self)
	if err != nil {
		return nil, err
	}
	key := opts.replicasDir() + opts.ID
	resp, err := opts.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(grant.ID))).
		Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("%w: %s", ErrDuplicateID, opts.ID)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = opts.Client.Revoke(rctx, grant.ID)
		cancel()
		return nil, fmt.Errorf("cluster: register %s: %w", opts.ID, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n := &Node{
		opts: opts, cli: opts.Client, lease: grant.ID, self: self,
		replicas:   newMirror(opts.Client, opts.replicasDir(), log),
		owners:     newMirror(opts.Client, opts.ownersDir(), log),
		cancel:     cancel,
		done:       make(chan struct{}),
		clock:      clock,
		validUntil: start + time.Duration(grant.TTL)*time.Second,
		held:       map[string]Fence{},
	}
	// First listings before returning, so that Replicas and Holder are
	// right from the start.
	var revs [2]int64
	for i, m := range []*mirror{n.replicas, n.owners} {
		if revs[i], err = m.list(ctx); err != nil {
			cancel()
			_, _ = opts.Client.Revoke(context.Background(), grant.ID)
			return nil, fmt.Errorf("cluster: list %s: %w", m.prefix, err)
		}
	}
	n.owners.applied = func() { n.forgetLost(log) }
	n.wg.Go(func() { n.replicas.run(runCtx, revs[0]) })
	n.wg.Go(func() { n.owners.run(runCtx, revs[1]) })
	n.wg.Go(func() { n.keepAlive(runCtx, log) })
	return n, nil
}

// agree records each of opts.Settings where the cluster has none yet and
// refuses a value other than the recorded one. The keys are bound to no
// lease: a setting outlives every replica, so that one joining after all
// others died still agrees with what they told their clients.
func agree(ctx context.Context, opts Options) error {
	names := make([]string, 0, len(opts.Settings))
	for name := range opts.Settings {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		key, want := opts.settingsDir()+name, opts.Settings[name]
		resp, err := opts.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, want)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return fmt.Errorf("cluster: setting %s: %w", name, err)
		}
		if resp.Succeeded {
			continue
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return fmt.Errorf("cluster: setting %s: its key %s vanished while read, try again", name, key)
		}
		if got := string(kvs[0].Value); got != want {
			return &SettingError{Name: name, Here: want, Cluster: got, Key: key}
		}
	}
	return nil
}

// keepAlive renews the lease every third of its TTL. It times each renewal
// from before the request was sent: the server renewed no earlier, so the
// lease lasts at least until then + TTL — a lower bound that stays right
// when this process was paused with an answer in flight. (The etcd
// client's own keep-alive stream does not expose when a renewal was sent.)
func (n *Node) keepAlive(ctx context.Context, log *slog.Logger) {
	defer n.markDone()
	period := n.opts.LeaseTTL / 3
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := n.clock.now()
		kctx, cancel := context.WithTimeout(ctx, period)
		resp, err := n.cli.KeepAliveOnce(kctx, n.lease)
		cancel()
		switch {
		case err == nil && resp.TTL > 0:
			n.mu.Lock()
			if until := sent + time.Duration(resp.TTL)*time.Second; until > n.validUntil {
				n.validUntil = until
			}
			n.mu.Unlock()
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			log.Error("replica lease lost", "lease", int64(n.lease))
			return
		case ctx.Err() != nil:
			return
		default:
			log.Warn("lease renewal failed", "err", err)
			if !n.Valid() {
				log.Error("replica lease may have lapsed: giving up its owner keys", "err", err)
				return
			}
		}
	}
}

// lostClaims lists, sorted, the units of held whose owner key a copy of
// the owner keys at revision rev (created: each key's create revision)
// shows gone or created anew. A claim newer than the copy is not judged.
func lostClaims(held map[string]Fence, rev int64, created map[string]int64) []string {
	var out []string
	for unit, f := range held {
		if rev >= f.CreateRevision && created[unit] != f.CreateRevision {
			out = append(out, unit)
		}
	}
	slices.Sort(out)
	return out
}

// forgetLost forgets every claim whose owner key the watch has seen
// deleted (or deleted and created again) while this replica's lease runs:
// by hand, by a bug, by anything but the lease. Its fence no longer holds,
// so the unit's writes would be refused; forgetting the claim at once
// makes [Node.FenceOf] false, and the caller stops answering for the unit
// before any write tells it, not only at its next write (a unit whose
// answers write nothing would be answered for ever).
func (n *Node) forgetLost(log *slog.Logger) {
	rev, created := n.owners.createdAt()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, unit := range lostClaims(n.held, rev, created) {
		log.Error("owner key deleted while this replica held it: giving the unit up", "unit", unit,
			"createRevision", n.held[unit].CreateRevision)
		delete(n.held, unit)
	}
}

// markDone forgets every claim and closes done (once).
func (n *Node) markDone() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.validUntil = 0
	n.held = map[string]Fence{}
	select {
	case <-n.done:
	default:
		close(n.done)
	}
}

// Self is this replica.
func (n *Node) Self() Replica { return n.self }

// Lease is this replica's etcd lease: [Options.TakeOver] of the next join
// after this node's lease was lost.
func (n *Node) Lease() clientv3.LeaseID { return n.lease }

// Done closes when the lease is lost (or after Leave): every owner key this
// replica held is gone or about to go, and its actors must stop.
func (n *Node) Done() <-chan struct{} { return n.done }

// Valid reports whether this replica's lease certainly still runs: the last
// renewal, timed from before it was sent, plus the TTL minus a margin of a
// tenth of the TTL for clock-rate drift lies ahead. A process that was
// paused or cut off from etcd, or whose host was suspended (the lease is
// measured on CLOCK_BOOTTIME on Linux, see leaseClock), finds false here
// before it answers anything.
func (n *Node) Valid() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.validUntil > 0 && n.clock.now() < n.validUntil-n.opts.LeaseTTL/10
}

// Changes signals (capacity 1, coalescing) whenever the set of live
// replicas changed.
func (n *Node) Changes() <-chan struct{} { return n.replicas.changed }

// OwnerChanges signals whenever some owner key was created or deleted.
func (n *Node) OwnerChanges() <-chan struct{} { return n.owners.changed }

// Replicas lists the live replicas, sorted by id.
func (n *Node) Replicas() []Replica {
	snap := n.replicas.snapshot()
	out := make([]Replica, 0, len(snap))
	for id, v := range snap {
		var r Replica
		if err := json.Unmarshal(v, &r); err != nil || r.ID != id {
			continue // not written by this package: ignore rather than route to it
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Replica) int { return cmpString(a.ID, b.ID) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// PlacedOn is the live replica unit is placed on by rendezvous hashing.
func (n *Node) PlacedOn(unit string) (Replica, bool) { return Owner(unit, n.Replicas()) }

// Holder is the replica whose owner key of unit exists now, as the watch
// has seen it; ok is false while nobody holds it (ownership is moving).
func (n *Node) Holder(unit string) (Replica, bool) {
	v, ok := n.owners.get(unit)
	if !ok {
		return Replica{}, false
	}
	var o ownerValue
	if err := json.Unmarshal(v, &o); err != nil {
		return Replica{}, false
	}
	return o.Replica, true
}

// Holders maps every held unit to its holder, as the watch has seen them.
func (n *Node) Holders() map[string]Replica {
	out := map[string]Replica{}
	for unit, v := range n.owners.snapshot() {
		var o ownerValue
		if json.Unmarshal(v, &o) == nil {
			out[unit] = o.Replica
		}
	}
	return out
}

// Held lists the units this replica holds, sorted.
func (n *Node) Held() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.held))
	for u := range n.held {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// Strays lists, sorted, the units whose owner key names this replica
// (as the watch has seen it) although [Node.Held] does not list them: a
// claim whose answer was lost, or that etcd carried out after the caller
// gave up, left a key bound to this lease that nobody else can claim
// while this replica lives. (A previous run under the same id may show
// here too until its lease lapses; its keys are not ours to release.) The
// caller claims each again, adopting the key, or releases it.
func (n *Node) Strays() []string {
	n.mu.Lock()
	held := maps.Clone(n.held)
	n.mu.Unlock()
	var out []string
	for unit, h := range n.Holders() {
		if _, ok := held[unit]; !ok && h.ID == n.self.ID {
			out = append(out, unit)
		}
	}
	slices.Sort(out)
	return out
}

// FenceOf returns the fence of a unit this replica holds: false once the
// claim was released, the lease lost, or the watch saw the owner key
// deleted.
func (n *Node) FenceOf(unit string) (Fence, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, ok := n.held[unit]
	return f, ok
}

// Claim creates the owner key of unit bound to this replica's lease, unless
// one exists: held by this replica, its fence is returned again; held by
// another, [ErrHeld]. The unit's state must be loaded from the store only
// after Claim returned, so that no write of the previous owner can follow
// the load.
func (n *Node) Claim(ctx context.Context, unit string) (Fence, error) {
	if !n.Valid() {
		return Fence{}, ErrLeaseLost
	}
	key := n.opts.ownersDir() + unit
	val, err := json.Marshal(ownerValue{Replica: n.self})
	if err != nil {
		return Fence{}, err
	}
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(n.lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return Fence{}, fmt.Errorf("cluster: claim %s: %w", unit, err)
	}
	var f Fence
	if resp.Succeeded {
		f = Fence{Key: key, CreateRevision: resp.Header.Revision}
	} else {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return Fence{}, fmt.Errorf("cluster: claim %s: owner key vanished, try again", unit)
		}
		if clientv3.LeaseID(kvs[0].Lease) != n.lease {
			var o ownerValue
			_ = json.Unmarshal(kvs[0].Value, &o)
			return Fence{}, fmt.Errorf("%w: %s held by %q", ErrHeld, unit, o.ID)
		}
		f = Fence{Key: key, CreateRevision: kvs[0].CreateRevision}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.done:
		return Fence{}, ErrLeaseLost
	default:
	}
	// The watch may have seen the key go already; it will not tell again.
	if rev, created := n.owners.createdAt(); len(lostClaims(map[string]Fence{unit: f}, rev, created)) > 0 {
		return Fence{}, fmt.Errorf("cluster: claim %s: owner key deleted right after it was created, try again", unit)
	}
	n.held[unit] = f
	return f, nil
}

// Release deletes the owner key of unit if this replica's claim still
// holds it, so that the next owner need not wait for the lease. Call it
// after the unit's actor has stopped writing. A unit this replica does
// not know it holds is released too if its key is bound to this lease (a
// claim whose answer was lost, see [Node.Strays]).
func (n *Node) Release(ctx context.Context, unit string) error {
	n.mu.Lock()
	f, ok := n.held[unit]
	delete(n.held, unit)
	n.mu.Unlock()
	cond := f.Cmp()
	if !ok {
		f.Key = n.opts.ownersDir() + unit
		cond = clientv3.Compare(clientv3.LeaseValue(f.Key), "=", n.lease)
	}
	_, err := n.cli.Txn(ctx).If(cond).Then(clientv3.OpDelete(f.Key)).Commit()
	if err != nil {
		return fmt.Errorf("cluster: release %s: %w", unit, err)
	}
	return nil
}

// Leave releases every owner key first, then the replica key while it is
// still this replica's, and revokes the lease; the watches stop. The caller has stopped every actor. Later
// calls do nothing.
func (n *Node) Leave(ctx context.Context) error {
	n.mu.Lock()
	if n.left {
		n.mu.Unlock()
		return nil
	}
	n.left = true
	units := make([]string, 0, len(n.held))
	for u := range n.held {
		units = append(units, u)
	}
	n.mu.Unlock()
	var errs []error
	for _, u := range units {
		errs = append(errs, n.Release(ctx, u))
	}
	// Only while the key is still bound to our lease: once the lease was
	// lost, another process may have registered under the same id, and
	// the key is its registration.
	key := n.opts.replicasDir() + n.opts.ID
	if _, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", n.lease)).
		Then(clientv3.OpDelete(key)).
		Commit(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: deregister: %w", err))
	}
	n.cancel()
	n.wg.Wait()
	if _, err := n.cli.Revoke(ctx, n.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		errs = append(errs, fmt.Errorf("cluster: revoke lease: %w", err))
	}
	n.markDone()
	return errors.Join(errs...)
}
