package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/redisops"
)

const base = protocol.BasePath

// Timing of the resharding tests: drain checks every 100 ms and a short
// producer routing lease, so that a scale-in drains in about a second.
const (
	drainCheck   = 100 * time.Millisecond
	shortLease   = 300 * time.Millisecond
	reshardLimit = 20 * time.Second
)

// reshardServer runs an in-process coordinator whose Redis is rdb, with
// authentication on (the handle administers as its admin).
func reshardServer(t *testing.T, rdb redis.UniversalClient, lease time.Duration, retire bool) *coordtest.Server {
	t.Helper()
	return coordtest.Start(t, "", coordtest.Options{
		Auth: &coordtest.Auth{}, AutoCreateGroups: true,
		Redis: redisops.Wrap(rdb), ProducerRoutingLease: lease, DrainCheckInterval: drainCheck,
		RetireRemovedShards: retire,
	})
}

func scaleBody(n int) protocol.ScaleRequest {
	return protocol.ScaleRequest{TargetShardCount: &n, RequestedBy: "test", Reason: "resharding test"}
}

func scaleTo(t *testing.T, s *coordtest.Server, prefix string, n int) protocol.Migration {
	t.Helper()
	var resp protocol.ScaleResponse
	s.JSON(http.MethodPost, base+"/streams/"+prefix+"/scale", scaleBody(n), http.StatusAccepted, &resp)
	if len(resp.Migrations) == 0 {
		t.Fatalf("scale answered no migration: %+v", resp)
	}
	return resp.Migrations[0]
}

// migration reads migration id of prefix through group.
func migration(t *testing.T, s *coordtest.Server, prefix, group, id string) protocol.Migration {
	t.Helper()
	var m protocol.Migration
	s.JSON(http.MethodGet, base+"/streams/"+prefix+"/groups/"+group+"/migrations/"+id, nil, http.StatusOK, &m)
	return m
}

// awaitMigration polls until migration id is in state want.
func awaitMigration(t *testing.T, s *coordtest.Server, prefix, group, id string, want protocol.MigrationState, within time.Duration) protocol.Migration {
	t.Helper()
	var m protocol.Migration
	if !poll.Wait(within, 50*time.Millisecond, func() bool { m = migration(t, s, prefix, group, id); return m.State == want }) {
		t.Fatalf("migration %s is %s after %v, want %s (detail: %s)", id, m.State, within, want, m.Detail)
	}
	return m
}

// awaitDraining polls until exactly the shards want of prefix's group are
// draining.
func awaitDraining(t *testing.T, s *coordtest.Server, prefix, group string, want []int) {
	t.Helper()
	var got []int
	if !poll.Wait(reshardLimit, 50*time.Millisecond, func() bool {
		got = draining(shardsOf(t, s, prefix, group))
		return slices.Equal(got, want)
	}) {
		t.Fatalf("draining shards stay %v, want %v", got, want)
	}
}

func routing(t *testing.T, s *coordtest.Server, prefix, group string) protocol.ProducerRoutingResponse {
	t.Helper()
	var r protocol.ProducerRoutingResponse
	s.JSON(http.MethodGet, base+"/streams/"+prefix+"/groups/"+group+"/producer-routing", nil, http.StatusOK, &r)
	return r
}

func shardsOf(t *testing.T, s *coordtest.Server, prefix, group string) protocol.ShardsResponse {
	t.Helper()
	var r protocol.ShardsResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/"+prefix+"/groups/"+group+"/shards", nil, http.StatusOK, &r)
	return r
}

// publish adds n records to each shard in shards (NOMKSTREAM, as producers do).
func publish(t *testing.T, rdb redis.UniversalClient, prefix string, shards []int, n int) {
	t.Helper()
	ctx := context.Background()
	for _, sh := range shards {
		for i := range n {
			err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: protocol.StreamKey(prefix, sh), NoMkStream: true, Values: []any{"i", i}}).Err()
			if err != nil {
				t.Fatalf("xadd %s: %v", protocol.StreamKey(prefix, sh), err)
			}
		}
	}
}

// consume reads everything new on shard as consumer c of group and acks it
// unless ack is false; it returns how many records it read.
func consume(t *testing.T, rdb redis.UniversalClient, prefix, group string, shard int, ack bool) int {
	t.Helper()
	ctx := context.Background()
	key := protocol.StreamKey(prefix, shard)
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "c", Streams: []string{key, ">"}, Count: 10000, Block: -1}).Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatalf("xreadgroup %s: %v", key, err)
	}
	n := 0
	for _, st := range res {
		for _, msg := range st.Messages {
			n++
			if ack {
				if err := rdb.XAck(ctx, key, group, msg.ID).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return n
}

// ackAll acks every pending entry of group on shard.
func ackAll(t *testing.T, rdb redis.UniversalClient, prefix, group string, shard int) {
	t.Helper()
	ctx := context.Background()
	key := protocol.StreamKey(prefix, shard)
	pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: group, Start: "-", End: "+", Count: 10000}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pend {
		if err := rdb.XAck(ctx, key, group, p.ID).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func keyExists(t *testing.T, rdb redis.UniversalClient, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func draining(r protocol.ShardsResponse) []int {
	out := []int{}
	for _, sh := range r.Shards {
		if sh.Draining {
			out = append(out, sh.ShardIndex)
		}
	}
	return out
}

// TestScaleInProvesDrainThenRetires scales 8→2 with no members: the Redis
// proof alone decides. Removed shards are retired one by one as their
// records are consumed and acknowledged; one left pending holds the
// migration in DRAINING; the keys are deleted once it is DEPRECATED, so a
// stale producer hits NOMKSTREAM. Then 2→0.
func TestScaleInProvesDrainThenRetires(t *testing.T) {
	t.Parallel()
	cluster := redistest.NewCluster(t)
	rdb := cluster.Client()
	s := reshardServer(t, rdb, shortLease, true)
	s.CreateStream("orders", 8)
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	publish(t, rdb, "orders", all, 10)

	started := time.Now()
	mig := scaleTo(t, s, "orders", 2)
	if mig.State != protocol.MigrationActive || mig.FromShardCount != 8 || mig.ToShardCount != 2 {
		t.Fatalf("scale-in answered %+v", mig)
	}
	if r := routing(t, s, "orders", "orders"); r.ShardCount != 2 || len(r.Shards) != 2 {
		t.Fatalf("routing after scale-in = %+v", r)
	}
	// Nothing is consumed yet: the migration waits in DRAINING and says why.
	m := awaitMigration(t, s, "orders", "orders", mig.ReshardingID, protocol.MigrationDraining, reshardLimit)
	if time.Since(started) < shortLease {
		t.Errorf("DRAINING after %v, before the producer routing lease %v", time.Since(started), shortLease)
	}
	// Once a drain check has said why, it stays there, saying so, over
	// several more.
	unconsumed := func() bool {
		m = migration(t, s, "orders", "orders", mig.ReshardingID)
		return m.State == protocol.MigrationDraining && strings.Contains(m.Detail, "lag 10")
	}
	if !poll.Wait(reshardLimit, drainCheck/2, unconsumed) || !poll.Stays(3*drainCheck, drainCheck/2, unconsumed) {
		t.Fatalf("unconsumed migration = %+v", m)
	}
	sh := shardsOf(t, s, "orders", "orders")
	if got := draining(sh); !slices.Equal(got, []int{2, 3, 4, 5, 6, 7}) || sh.ShardCount != 2 {
		t.Fatalf("draining shards = %v (%+v)", got, sh)
	}
	for _, st := range sh.Shards {
		if st.Length != 10 || st.Lag == nil || *st.Lag != 10 || !st.Exists {
			t.Fatalf("shard before consumption = %+v", st)
		}
	}

	// Consume every removed shard; leave shard 7's records pending.
	for _, shard := range []int{2, 3, 4, 5, 6, 7} {
		if n := consume(t, rdb, "orders", "orders", shard, shard != 7); n != 10 {
			t.Fatalf("read %d records of shard %d, want 10", n, shard)
		}
	}
	awaitDraining(t, s, "orders", "orders", []int{7})
	pending := func() bool {
		m = migration(t, s, "orders", "orders", mig.ReshardingID)
		return m.State == protocol.MigrationDraining && strings.Contains(m.Detail, "pending")
	}
	if !poll.Wait(reshardLimit, drainCheck/2, pending) || !poll.Stays(3*drainCheck, drainCheck/2, pending) {
		t.Fatalf("with records pending on shard 7 the migration is %+v", m)
	}
	ackAll(t, rdb, "orders", "orders", 7)
	awaitMigration(t, s, "orders", "orders", mig.ReshardingID, protocol.MigrationDeprecated, reshardLimit)
	for _, shard := range []int{2, 3, 4, 5, 6, 7} {
		if keyExists(t, rdb, protocol.StreamKey("orders", shard)) {
			t.Errorf("retired key %s still exists", protocol.StreamKey("orders", shard))
		}
	}
	// A producer with stale routing: NOMKSTREAM refuses, routing says 2.
	err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: "orders:5", NoMkStream: true, Values: []any{"late", 1}}).Err()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("xadd NOMKSTREAM on a retired shard: %v, want nil reply", err)
	}
	if r := routing(t, s, "orders", "orders"); r.ShardCount != 2 {
		t.Fatalf("routing = %+v", r)
	}

	// 2→0: every shard drains away.
	publish(t, rdb, "orders", []int{0, 1}, 5)
	zero := scaleTo(t, s, "orders", 0)
	if r := routing(t, s, "orders", "orders"); r.ShardCount != 0 || len(r.Shards) != 0 {
		t.Fatalf("routing at 0 shards = %+v", r)
	}
	awaitMigration(t, s, "orders", "orders", zero.ReshardingID, protocol.MigrationDraining, reshardLimit)
	consume(t, rdb, "orders", "orders", 0, true)
	consume(t, rdb, "orders", "orders", 1, true)
	awaitMigration(t, s, "orders", "orders", zero.ReshardingID, protocol.MigrationDeprecated, reshardLimit)
	if keyExists(t, rdb, "orders:0") || keyExists(t, rdb, "orders:1") {
		t.Error("keys of the 0-shard stream survive")
	}
	var g protocol.GroupResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders", nil, http.StatusOK, &g)
	if g.ShardCount != 0 || g.ActiveMigration != nil {
		t.Fatalf("group at 0 shards = %+v", g)
	}
}

// TestScaleOutProvisionsEveryGroupAndRollsBack: 4→8 creates the new shard
// streams with every group's consumer group on them (a group registered
// later too), refuses a second scale, and rolls back while ACTIVE.
func TestScaleOutProvisionsEveryGroupAndRollsBack(t *testing.T) {
	t.Parallel()
	cluster := redistest.NewCluster(t)
	rdb := cluster.Client()
	s := reshardServer(t, rdb, time.Minute, false) // the lease keeps it ACTIVE
	s.CreateStream("orders", 4)
	s.JSON(http.MethodPost, base+"/streams/orders/groups/billing", `{"requestedBy":"test"}`, http.StatusCreated, nil)
	mig := scaleTo(t, s, "orders", 8)
	if mig.State != protocol.MigrationActive {
		t.Fatalf("scale-out answered %+v", mig)
	}
	if r := routing(t, s, "orders", "orders"); r.ShardCount != 8 {
		t.Fatalf("routing after scale-out = %+v", r)
	}
	// A group registered after the scale is provisioned on registration.
	routing(t, s, "orders", "late")
	ctx := context.Background()
	for i := range 8 {
		groups, err := rdb.XInfoGroups(ctx, protocol.StreamKey("orders", i)).Result()
		if err != nil {
			t.Fatalf("xinfo groups orders:%d: %v", i, err)
		}
		var names []string
		for _, g := range groups {
			names = append(names, g.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"billing", "late", "orders"}) {
			t.Errorf("groups on orders:%d = %v", i, names)
		}
	}
	status, raw := s.Do(http.MethodPost, base+"/streams/orders/scale", scaleBody(6))
	if status != http.StatusConflict || !strings.Contains(string(raw), string(protocol.CodeActiveMigrationExists)) {
		t.Fatalf("second scale: %d %s", status, raw)
	}
	var m protocol.Migration
	s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/migrations/"+mig.ReshardingID+"/rollback",
		`{"requestedBy":"test","reason":"too many"}`, http.StatusAccepted, &m)
	// The added shards drain before ROLLED_BACK (producers may still hold
	// the 8-shard routing): TestRollbackOfScaleOutStrandsNothing.
	if m.State != protocol.MigrationRollingBack {
		t.Fatalf("rollback = %+v", m)
	}
	if r := routing(t, s, "orders", "orders"); r.ShardCount != 4 {
		t.Fatalf("routing after rollback = %+v", r)
	}
	if got := draining(shardsOf(t, s, "orders", "orders")); !slices.Equal(got, []int{4, 5, 6, 7}) {
		t.Fatalf("draining after rollback = %v", got)
	}
}

// TestProvisioningFailureStaysPreparingAndResumes: with Redis stopped a
// scale-out answers 503 and the migration stays PREPARING; health says
// Redis is DOWN; the same request once Redis is back completes it.
func TestProvisioningFailureStaysPreparingAndResumes(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	// Clients of srv.Client() are closed by srv.Stop: use our own.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	s := reshardServer(t, rdb, time.Minute, false)
	s.CreateStream("orders", 4)
	routing(t, s, "orders", "orders") // provisions; later refreshes of the same version skip Redis
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	status, raw := s.Do(http.MethodPost, base+"/streams/orders/scale", scaleBody(6))
	if status != http.StatusServiceUnavailable || !strings.Contains(string(raw), string(protocol.CodeRedisStreamProvisioningFailed)) {
		t.Fatalf("scale with Redis stopped: %d %s", status, raw)
	}
	var ms protocol.MigrationsResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/migrations", nil, http.StatusOK, &ms)
	if len(ms.Migrations) != 1 || ms.Migrations[0].State != protocol.MigrationPreparing {
		t.Fatalf("migrations after the failure = %+v", ms)
	}
	var h protocol.Health
	s.JSON(http.MethodGet, base+"/monitoring/health", nil, http.StatusOK, &h)
	if h.RedisDetail.Status != protocol.HealthDown || h.Status != protocol.HealthDegraded {
		t.Fatalf("health with Redis stopped = %+v", h)
	}
	if r := routing(t, s, "orders", "orders"); r.ShardCount != 4 {
		t.Errorf("routing while PREPARING = %d shards, want 4", r.ShardCount)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	mig := scaleTo(t, s, "orders", 6)
	if mig.State != protocol.MigrationActive || mig.ReshardingID != ms.Migrations[0].ReshardingID {
		t.Fatalf("repeated scale = %+v, want %s ACTIVE", mig, ms.Migrations[0].ReshardingID)
	}
	for _, key := range []string{"orders:4", "orders:5"} {
		if !keyExists(t, rdb, key) {
			t.Errorf("%s not provisioned", key)
		}
	}
	s.JSON(http.MethodGet, base+"/monitoring/health", nil, http.StatusOK, &h)
	if h.RedisDetail.Status != protocol.HealthUp {
		t.Fatalf("health with Redis back = %+v", h)
	}
}

// TestWithoutRedisScaleSaysSo: no Redis, the scale activates at once and
// its record and health say no provisioning or drain proof happens; the
// shards endpoint answers REDIS_NOT_CONFIGURED.
func TestWithoutRedisScaleSaysSo(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	s.CreateStream("orders", 4)
	mig := scaleTo(t, s, "orders", 2)
	if mig.State != protocol.MigrationActive || !strings.Contains(mig.Detail, "redis not configured") {
		t.Fatalf("scale without Redis = %+v", mig)
	}
	var h protocol.Health
	s.JSON(http.MethodGet, base+"/monitoring/health", nil, http.StatusOK, &h)
	if h.RedisDetail.Status != protocol.HealthNotConfigured {
		t.Fatalf("health = %+v", h)
	}
	status, raw := s.Do(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/shards", nil)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(raw), string(protocol.CodeRedisNotConfigured)) {
		t.Fatalf("shards without Redis: %d %s", status, raw)
	}
	var m protocol.Migration
	s.JSON(http.MethodPost, fmt.Sprintf("%s/streams/orders/migrations/%s/complete", base, mig.ReshardingID),
		`{"requestedBy":"test","reason":"drained by hand"}`, http.StatusAccepted, &m)
	if m.State != protocol.MigrationDeprecated {
		t.Fatalf("complete = %+v", m)
	}
}

// TestCoordinatorKilledWhileDrainingResumes: the coordinator binary is
// SIGKILLed while a scale-in is DRAINING (records pending on a removed
// shard); restarted on the same data dir it keeps checking, and the
// migration becomes DEPRECATED once the records are acknowledged.
func TestCoordinatorKilledWhileDrainingResumes(t *testing.T) {
	t.Parallel()
	b := build(t)
	cluster := redistest.NewCluster(t)
	rdb := cluster.Client()
	dir := filepath.Join(t.TempDir(), "coord")
	flags := []string{"--redis", strings.Join(cluster.Addrs, ","), "--producer-routing-lease", shortLease.String(),
		"--drain-check-interval", "200ms", "--retire-removed-shards"}
	coord, url := startCoordinator(t, b.coordinator, dir, flags...)
	s := remote(t, url)
	s.CreateStream("orders", 4)
	publish(t, rdb, "orders", []int{2, 3}, 10)
	consume(t, rdb, "orders", "orders", 2, true)
	consume(t, rdb, "orders", "orders", 3, false) // left pending
	mig := scaleTo(t, s, "orders", 2)
	awaitMigration(t, s, "orders", "orders", mig.ReshardingID, protocol.MigrationDraining, reshardLimit)
	awaitDraining(t, s, "orders", "orders", []int{3})
	if err := coord.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = coord.Wait(10 * time.Second) // killed: its exit status is an error

	coord, url = startCoordinator(t, b.coordinator, dir, flags...)
	s = remote(t, url)
	if m := migration(t, s, "orders", "orders", mig.ReshardingID); m.State != protocol.MigrationDraining {
		t.Fatalf("after the restart the migration is %+v", m)
	}
	ackAll(t, rdb, "orders", "orders", 3)
	awaitMigration(t, s, "orders", "orders", mig.ReshardingID, protocol.MigrationDeprecated, reshardLimit)
	if keyExists(t, rdb, "orders:3") || keyExists(t, rdb, "orders:2") {
		t.Error("retired keys survive the restart")
	}
	if err := coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := coord.Wait(30 * time.Second); err != nil {
		t.Fatalf("coordinator after SIGTERM: %v", err)
	}
}

// TestRollbackOfScaleOutStrandsNothing: a producer that fetched the
// scaled-out routing keeps publishing on it for up to one routing lease
// after a rollback, and its NOMKSTREAM writes to an added shard succeed
// (the key exists). The added shards must therefore stay readable and
// assigned after the rollback, draining like a scale-in's removed shards,
// until Redis proves them drained: only then is the migration ROLLED_BACK.
// Before, the rollback took them out of the layout at once and such a
// record was never read.
func TestRollbackOfScaleOutStrandsNothing(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	ctx := context.Background()
	cluster := redistest.NewCluster(t)
	rdb := cluster.Client()
	s := reshardServer(t, rdb, lease, true)
	s.CreateStream("orders", 2)
	mig := scaleTo(t, s, "orders", 4)
	if mig.State != protocol.MigrationActive {
		t.Fatalf("scale-out answered %+v", mig)
	}
	stale, err := producer.New(producer.WithCoordinator(s.URL), producer.WithStream("orders"), producer.WithRedis(rdb),
		producer.WithRefreshInterval(10*time.Minute), producer.WithRoutingLease(20*time.Minute),
		producer.WithBasicAuth(coordtest.UserMember, coordtest.Password(coordtest.UserMember)))
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	if r, ok := stale.Routing(); !ok || r.ShardCount != 4 {
		t.Fatalf("producer routing = %+v", r)
	}

	var m protocol.Migration
	s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/migrations/"+mig.ReshardingID+"/rollback",
		`{"requestedBy":"test","reason":"too many"}`, http.StatusAccepted, &m)
	if r := routing(t, s, "orders", "orders"); r.ShardCount != 2 {
		t.Fatalf("routing after rollback = %+v", r)
	}
	// Within its lease the producer still routes over 4 shards.
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("late-%d", i); protocol.Route(k, 4) == 3 {
			key = k
		}
	}
	streamKey, _, err := stale.Publish(ctx, key, []any{"eventId", "late"})
	if err != nil {
		t.Fatalf("stale producer: %v", err)
	}
	// The rollback and the routing check take milliseconds, far within
	// the 2 s lease: a producer that refreshed anyway has lost the very
	// behaviour this test stands on, so that is a failure, not a skip
	// (a skip here passed the suite without checking anything).
	if streamKey != "orders:3" {
		t.Fatalf("the stale producer wrote to %s, want orders:3: it refreshed its routing within the lease, so nothing was published on the scaled-out routing", streamKey)
	}
	// The record on orders:3 must stay readable: the added shards drain.
	if got := draining(shardsOf(t, s, "orders", "orders")); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("after the rollback the added shards are not draining (draining %v): a record on orders:3 is never read", got)
	}
	if m.State == protocol.MigrationRolledBack {
		t.Fatalf("rollback answered %+v with the added shards still draining", m)
	}
	// Unread, the record holds the rollback open, all along the lease and
	// past it.
	if !poll.Stays(lease+5*drainCheck, drainCheck, func() bool {
		m = migration(t, s, "orders", "orders", mig.ReshardingID)
		return m.State == protocol.MigrationRollingBack
	}) || !strings.Contains(m.Detail, "lag 1") {
		t.Fatalf("with an unread record on orders:3 the migration is %+v", m)
	}
	if n := consume(t, rdb, "orders", "orders", 3, true); n != 1 {
		t.Fatalf("read %d records of orders:3, want 1", n)
	}
	m = awaitMigration(t, s, "orders", "orders", mig.ReshardingID, protocol.MigrationRolledBack, reshardLimit)
	if sh := shardsOf(t, s, "orders", "orders"); sh.ShardCount != 2 || len(draining(sh)) != 0 {
		t.Fatalf("after ROLLED_BACK the shards are %+v", sh)
	}
	for _, k := range []string{"orders:2", "orders:3"} {
		if keyExists(t, rdb, k) {
			t.Errorf("%s survives the rollback with --retire-removed-shards", k)
		}
	}
}
