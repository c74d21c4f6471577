package cluster_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func client(t *testing.T, c *etcdtest.Cluster, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cli, err := c.ClientOf(endpoints...)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func join(t *testing.T, cli *clientv3.Client, id string, ttl time.Duration) *cluster.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := cluster.Join(ctx, cluster.Options{Client: cli, ID: id, AdvertiseURL: "http://" + id + ".test:8080", LeaseTTL: ttl})
	if err != nil {
		t.Fatalf("join %s: %v", id, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Leave(ctx)
	})
	return n
}

// eventually polls cond every 20 ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fencedPut is a store write as the persistence engine makes it: the put
// happens only if the fence still holds.
func fencedPut(cli *clientv3.Client, f cluster.Fence, key, value string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Txn(ctx).If(f.Cmp()).Then(clientv3.OpPut(key, value)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func TestReplicasSeeEachOtherAndClaimEachUnitOnce(t *testing.T) {
	c := etcdtest.NewCluster(t)
	ctx := context.Background()
	ids := []string{"r1", "r2", "r3"}
	nodes := map[string]*cluster.Node{}
	for _, id := range ids {
		nodes[id] = join(t, client(t, c), id, 2*time.Second)
	}
	for id, n := range nodes {
		eventually(t, 5*time.Second, id+" sees 3 replicas", func() bool { return len(n.Replicas()) == 3 })
		if !n.Valid() {
			t.Fatalf("%s not valid right after joining", id)
		}
	}
	var us []string
	for _, g := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		us = append(us, "group/orders/"+g)
	}
	for id, n := range nodes {
		claim, release := cluster.Plan(id, us, n.Held(), n.Replicas())
		if len(release) != 0 {
			t.Fatalf("%s releases %v holding nothing", id, release)
		}
		for _, u := range claim {
			if _, err := n.Claim(ctx, u); err != nil {
				t.Fatalf("%s claims %s: %v", id, u, err)
			}
		}
	}
	for _, u := range us {
		var holders []string
		for id, n := range nodes {
			if _, ok := n.FenceOf(u); ok {
				holders = append(holders, id)
			}
		}
		if len(holders) != 1 {
			t.Fatalf("%s held by %v", u, holders)
		}
		for id, n := range nodes {
			eventually(t, 5*time.Second, id+" sees the holder of "+u, func() bool {
				h, ok := n.Holder(u)
				return ok && h.ID == holders[0]
			})
		}
		// A second claim by anyone else is refused; by the holder it is
		// idempotent.
		for id, n := range nodes {
			f, err := n.Claim(ctx, u)
			if id == holders[0] {
				if want, _ := n.FenceOf(u); err != nil || f != want {
					t.Fatalf("holder %s re-claims %s: %v, %v (want %v)", id, u, f, err, want)
				}
			} else if !errors.Is(err, cluster.ErrHeld) {
				t.Fatalf("%s claims %s held by %s: %v", id, u, holders[0], err)
			}
		}
	}
}

func TestDuplicateReplicaIDIsRefused(t *testing.T) {
	c := etcdtest.NewCluster(t)
	join(t, client(t, c), "r1", 2*time.Second)
	_, err := cluster.Join(context.Background(), cluster.Options{Client: client(t, c), ID: "r1", AdvertiseURL: "http://other:1"})
	if !errors.Is(err, cluster.ErrDuplicateID) {
		t.Fatalf("second r1: %v, want ErrDuplicateID", err)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	err := cluster.Options{Root: "x", AdvertiseURL: "ftp://h", LeaseTTL: time.Second}.Validate()
	for _, want := range []string{"no etcd client", "empty replica id", "advertise URL", "root", "lease TTL"} {
		if err == nil || !contains(err.Error(), want) {
			t.Fatalf("Validate: %v, want a problem mentioning %q", err, want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A replica frozen past its lease (here: its etcd traffic frozen, as a
// SIGSTOPped process's would be) knows it is not valid before anybody else
// can claim its units, and after it thaws no write with its old fence gets
// through.
func TestFrozenOwnerNeverWritesAgain(t *testing.T) {
	c := etcdtest.NewCluster(t)
	ctx := context.Background()
	target, err := url.Parse(c.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := etcdtest.NewProxy(t, target.Host)
	frozenCli := client(t, c, proxy.URL)
	a := join(t, frozenCli, "a", 2*time.Second)
	b := join(t, client(t, c), "b", 2*time.Second)
	const unit = "group/orders/billing"
	fa, err := a.Claim(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fencedPut(frozenCli, fa, "/data/g", "from a, epoch 1"); err != nil || !ok {
		t.Fatalf("owner's fenced write: %v, %v", ok, err)
	}

	proxy.Pause()
	frozenAt := time.Now()
	var fb cluster.Fence
	eventually(t, 10*time.Second, "b claims the unit after a's lease lapsed", func() bool {
		f, err := b.Claim(ctx, unit)
		if err != nil {
			return false
		}
		fb = f
		return true
	})
	claimedAfter := time.Since(frozenAt)
	if a.Valid() {
		t.Fatalf("a still thinks its lease runs when b claimed its unit (%v after the freeze)", claimedAfter)
	}
	if fb.CreateRevision <= fa.CreateRevision {
		t.Fatalf("new fence %v not above the old %v", fb, fa)
	}
	if ok, err := fencedPut(client(t, c), fb, "/data/g", "from b, epoch 2"); err != nil || !ok {
		t.Fatalf("new owner's fenced write: %v, %v", ok, err)
	}

	proxy.Resume()
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a did not notice its lost lease after thawing")
	}
	if ok, err := fencedPut(frozenCli, fa, "/data/g", "from a, stale"); err != nil || ok {
		t.Fatalf("deposed owner's fenced write: succeeded=%v err=%v, want refused", ok, err)
	}
	if _, err := a.Claim(ctx, unit); !errors.Is(err, cluster.ErrLeaseLost) {
		t.Fatalf("claim after the lease was lost: %v, want ErrLeaseLost", err)
	}
	resp, err := client(t, c).Get(ctx, "/data/g")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "from b, epoch 2" {
		t.Fatalf("stored value %v (%v), want b's write", resp, err)
	}
}

func TestLeaveHandsOverWithoutWaitingForTheLease(t *testing.T) {
	c := etcdtest.NewCluster(t)
	ctx := context.Background()
	a := join(t, client(t, c), "a", 10*time.Second) // a lapse would take 10 s
	b := join(t, client(t, c), "b", 2*time.Second)
	const unit = "group/orders/billing"
	if _, err := a.Claim(ctx, unit); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b sees a", func() bool { return len(b.Replicas()) == 2 })
	start := time.Now()
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, unit); err != nil {
		t.Fatalf("b claims right after a left: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("hand-over took %v", d)
	}
	eventually(t, 5*time.Second, "b sees a gone", func() bool { return len(b.Replicas()) == 1 })
	if a.Valid() {
		t.Fatal("a valid after Leave")
	}
}

// TestLeaveKeepsASuccessorsRegistration: a replica whose lease was lost,
// and whose id a new process registered since, leaves without deleting
// the new process's replica key — noticed the loss or not.
func TestLeaveKeepsASuccessorsRegistration(t *testing.T) {
	tests := []struct {
		name, id string
		notice   bool // wait until the old replica saw its lease lost
	}{
		{"loss unnoticed", "x1", false},
		{"loss noticed", "x2", true},
	}
	c := etcdtest.NewCluster(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cli := client(t, c)
			key := cluster.DefaultRoot + "replicas/" + tc.id
			leaseOf := func() (clientv3.LeaseID, bool) {
				t.Helper()
				resp, err := cli.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Kvs) == 0 {
					return 0, false
				}
				return clientv3.LeaseID(resp.Kvs[0].Lease), true
			}
			old := join(t, client(t, c), tc.id, cluster.MinLeaseTTL)
			lease, ok := leaseOf()
			if !ok {
				t.Fatal("the old replica is not registered")
			}
			if _, err := cli.Revoke(ctx, lease); err != nil {
				t.Fatal(err)
			}
			if tc.notice {
				select {
				case <-old.Done():
				case <-ctx.Done():
					t.Fatal("the old replica never noticed its lease lost")
				}
			}
			join(t, client(t, c), tc.id, 10*time.Second)
			successor, ok := leaseOf()
			if !ok || successor == lease {
				t.Fatalf("successor not registered (lease %x, the old one %x)", successor, lease)
			}
			if err := old.Leave(ctx); err != nil {
				t.Fatalf("old replica leaves: %v", err)
			}
			if got, ok := leaseOf(); !ok || got != successor {
				t.Fatalf("after the old replica left the key is bound to lease %x (present %v), want the successor's %x", got, ok, successor)
			}
		})
	}
}

// Settings every replica must share: the first to join records them, a
// replica naming another value is refused before it registers (so it is
// nobody's placement target), one naming the same joins, and the record
// outlives every replica.
func TestSettingsMustAgree(t *testing.T) {
	c := etcdtest.NewCluster(t)
	ctx := context.Background()
	opts := func(id, lease string) cluster.Options {
		return cluster.Options{Client: client(t, c), ID: id, AdvertiseURL: "http://" + id + ".test:8080",
			Settings: map[string]string{"member-lease": lease}}
	}
	first, err := cluster.Join(ctx, opts("r1", "15s"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cluster.Join(ctx, opts("r2", "30s"))
	se, ok := errors.AsType[*cluster.SettingError](err)
	if !ok || !errors.Is(err, cluster.ErrSettingDiffers) || se.Here != "30s" || se.Cluster != "15s" {
		t.Fatalf("join with another setting: %v, want a SettingError 30s against 15s", err)
	}
	for _, r := range first.Replicas() {
		if r.ID == "r2" {
			t.Fatal("the refused replica registered")
		}
	}
	if err := first.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	// Nobody is live now: the record still stands.
	if _, err := cluster.Join(ctx, opts("r2", "30s")); !errors.Is(err, cluster.ErrSettingDiffers) {
		t.Fatalf("join with another setting after every replica left: %v, want ErrSettingDiffers", err)
	}
	join := func() error {
		n, err := cluster.Join(ctx, opts("r3", "15s"))
		if err == nil {
			err = n.Leave(ctx)
		}
		return err
	}
	if err := join(); err != nil {
		t.Fatalf("join with the cluster's setting: %v", err)
	}
}

// A claim whose answer is lost (etcd created the owner key, the caller
// gave up before hearing so) leaves a key bound to this replica's lease
// that the replica did not know it holds. It must still be able to give
// the unit up, so that the replica placement names can claim it while
// this one lives; and claiming it again adopts the key.
func TestClaimWithALostAnswerCanBeReleased(t *testing.T) {
	c := etcdtest.NewCluster(t)
	ctx := context.Background()
	target, err := url.Parse(c.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := etcdtest.NewProxy(t, target.Host)
	a := join(t, client(t, c, proxy.URL), "a", 3*time.Second)
	b := join(t, client(t, c), "b", 3*time.Second)
	const unit = "stream/orders"

	proxy.PauseReplies()
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = a.Claim(lctx, unit)
	cancel()
	proxy.Resume()
	if err == nil {
		t.Fatal("a claim whose answer was held succeeded")
	}
	eventually(t, 5*time.Second, "the lost claim's owner key shows a as the holder", func() bool {
		h, ok := b.Holder(unit)
		return ok && h.ID == "a"
	})
	if _, err := b.Claim(ctx, unit); !errors.Is(err, cluster.ErrHeld) {
		t.Fatalf("b's claim while a's key exists: %v, want ErrHeld", err)
	}
	eventually(t, 5*time.Second, "a lists the unit as a stray", func() bool {
		got := a.Strays()
		return len(got) == 1 && got[0] == unit
	})
	// Adopting it: a's claim again returns the key's fence.
	f, err := a.Claim(ctx, unit)
	if err != nil || f.CreateRevision == 0 {
		t.Fatalf("claiming the unit again: %v %v", f, err)
	}
	if got := a.Strays(); len(got) != 0 || !slices.Equal(a.Held(), []string{unit}) {
		t.Fatalf("after adopting: strays %v, held %v", got, a.Held())
	}
	// Lost again, then given up without ever having been adopted.
	if err := a.Release(ctx, unit); err != nil {
		t.Fatal(err)
	}
	proxy.PauseReplies()
	lctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = a.Claim(lctx, unit)
	cancel()
	proxy.Resume()
	if err == nil {
		t.Fatal("a claim whose answer was held succeeded")
	}
	if err := a.Release(ctx, unit); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b claims the unit a gave up", func() bool {
		_, err := b.Claim(ctx, unit)
		return err == nil
	})
	if !a.Valid() {
		t.Fatal("a's lease is not certain after the test's short pauses")
	}
}

// A host suspended for longer than the lease: the clock the lease is
// measured on jumps ahead while Go's monotonic clock stands still (what
// CLOCK_BOOTTIME does when the host wakes). etcd has counted the lease
// down meanwhile, so the replica must not take it as running, though no
// renewal failed yet; a renewal sent after the wake makes it certain
// again (here etcd, which was not suspended, still holds the lease).
func TestSuspendedHostDoesNotTrustItsLease(t *testing.T) {
	c := etcdtest.NewCluster(t)
	const ttl = 2 * time.Second
	var suspended atomic.Int64
	now := func() time.Duration { return cluster.LeaseClockNow() + time.Duration(suspended.Load()) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := cluster.JoinWithClock(ctx, cluster.Options{Client: client(t, c), ID: "a", AdvertiseURL: "http://a.test:8080", LeaseTTL: ttl}, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Leave(ctx)
	})
	if !n.Valid() {
		t.Fatal("lease not valid right after the join")
	}
	for i, jump := range []time.Duration{2 * ttl, 10 * ttl} {
		suspended.Add(int64(jump))
		if n.Valid() {
			t.Fatalf("wake %d: lease taken as valid after a suspension of %v, more than its TTL %v", i, jump, ttl)
		}
		eventually(t, 3*ttl, "a renewal after the wake makes the lease certain again", n.Valid)
	}
}

// An owner key deleted while its holder's lease runs (by hand, or by
// anything but the lease): the holder forgets the claim as soon as its
// watch sees the deletion, so it stops answering for the unit before a
// write tells it (answers that write nothing would go on for ever), and
// another replica's claim of the unit is not taken for its own.
func TestOwnerKeyDeletedUnderTheHolder(t *testing.T) {
	c := etcdtest.NewCluster(t)
	ctx := context.Background()
	a := join(t, client(t, c), "a", 2*time.Second)
	b := join(t, client(t, c), "b", 2*time.Second)
	const unit = "stream/orders"
	fa, err := a.Claim(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client(t, c).Delete(ctx, fa.Key); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a forgets the claim whose key was deleted", func() bool {
		_, ok := a.FenceOf(unit)
		return !ok
	})
	if slices.Contains(a.Held(), unit) {
		t.Fatalf("a still lists %s as held", unit)
	}
	if !a.Valid() {
		t.Fatal("a's lease itself is fine")
	}
	if _, err := b.Claim(ctx, unit); err != nil {
		t.Fatalf("b's claim after the deletion: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the watch delivers b's claim too
	if _, ok := a.FenceOf(unit); ok {
		t.Fatal("a holds a fence of a unit b claimed")
	}
	if _, err := a.Claim(ctx, unit); !errors.Is(err, cluster.ErrHeld) {
		t.Fatalf("a's claim while b holds it: %v, want ErrHeld", err)
	}
}

// A replica that gave its lease up (lost, as after a quorum loss) and
// joins again names that lease: the join revokes it, so the old
// registration and every owner key bound to it go at once instead of a
// lease later, and the old node knows it is done.
func TestJoinTakesOverItsPreviousLease(t *testing.T) {
	c := etcdtest.NewCluster(t)
	old := join(t, client(t, c), "r1", 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := old.Claim(ctx, "stream/orders"); err != nil {
		t.Fatal(err)
	}
	opts := cluster.Options{Client: client(t, c), ID: "r1", AdvertiseURL: "http://r1.test:8080", LeaseTTL: 10 * time.Second}
	if _, err := cluster.Join(ctx, opts); !errors.Is(err, cluster.ErrDuplicateID) {
		t.Fatalf("join again without the previous lease: %v, want ErrDuplicateID", err)
	}
	opts.TakeOver = old.Lease()
	again, err := cluster.Join(ctx, opts)
	if err != nil {
		t.Fatalf("join again taking the previous lease over: %v", err)
	}
	t.Cleanup(func() { _ = again.Leave(context.Background()) })
	if _, held := again.Holder("stream/orders"); held {
		eventually(t, 5*time.Second, "the old owner key gone", func() bool {
			_, held := again.Holder("stream/orders")
			return !held
		})
	}
	if _, err := again.Claim(ctx, "stream/orders"); err != nil {
		t.Fatalf("claim after the take-over: %v", err)
	}
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the node whose lease was revoked is not done")
	}
}
