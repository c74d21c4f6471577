package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/ratelog"
	"github.com/rscoord/rscoord/persistence"
)

// Config configures a [Coordinator].
type Config struct {
	// Store holds every stream and group durably. Required.
	Store persistence.Store
	// Group holds the timing rules given to every group.
	Group assign.Config
	// DefaultShards is the shard count of a stream created without one.
	// Default protocol.DefaultShardCount.
	DefaultShards int
	// AutoCreateGroups registers an unknown group of a known stream on its
	// first join or producer-routing request (ours).
	AutoCreateGroups bool
	// Placed starts the coordinator without any stream: the caller adds
	// and drops streams ([Coordinator.AddStream], [Coordinator.DropStream])
	// as this replica claims and releases them (cluster mode).
	Placed bool
	// CoordinatorID names this coordinator in health answers. Default
	// "rscoord-" plus a random suffix from the actor system.
	CoordinatorID string
	// AskTimeout bounds how long a caller waits for an actor when its
	// context has no earlier deadline. Default 10s.
	AskTimeout time.Duration
	// Logger receives structured logs, protoactor's included. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now; tests pin it.
	Now func() time.Time
	// Observer receives events for metrics. Default: none.
	Observer Observer

	// Redis provisions shard streams and proves drains (docs/protocol.md §7).
	// Nil: scales activate at once, with no provisioning and no drain
	// proof; removed shards stay until an operator completes the
	// migration. Health says NOT_CONFIGURED.
	Redis StreamRedis
	// ProducerRoutingLease is how long a producer may keep publishing on
	// routing it has not refreshed: no migration leaves ACTIVE, and so no
	// removed shard retires, sooner than this after activation. Default
	// 60s (the JVM starter refreshes every 30 s and has no lease).
	ProducerRoutingLease time.Duration
	// DrainCheckInterval is how often the stream actor checks an ACTIVE or
	// DRAINING migration against Redis. Default 5s.
	DrainCheckInterval time.Duration
	// RetireRemovedShards deletes the keys of removed shards once their
	// migration is DEPRECATED, so that late producers hit NOMKSTREAM.
	RetireRemovedShards bool
	// RedisTimeout bounds one Redis step (a provisioning, one drain check).
	// Default 5s.
	RedisTimeout time.Duration
	// MaxHeldHeartbeats bounds the heartbeats the coordinator holds at once,
	// across every group (waitMs, docs/protocol.md §9.5); past it heartbeats
	// are answered at once. Each costs a stored request, a timer and, above
	// all, an HTTP connection kept busy: the bound must leave connections
	// for joins, reports and admin calls. Default 65536.
	MaxHeldHeartbeats int

	// MaxGroupsPerStream bounds the groups of one stream: past it, a
	// caller without ADMIN on the stream has no group registered on the
	// fly (a join or producer routing with AutoCreateGroups) and is
	// refused GROUP_LIMIT_REACHED. Each group is durable, is provisioned
	// on every shard in Redis and has its own metric series. Admin
	// creates are not limited. Default [DefaultMaxGroupsPerStream].
	MaxGroupsPerStream int
	// MaxGroupRegistrationsPerPrincipal bounds the groups one principal
	// without ADMIN has registered on the fly, across streams, within
	// GroupRegistrationWindow; past it, GROUP_LIMIT_REACHED. It keeps one
	// credential from taking a stream's whole MaxGroupsPerStream. The
	// count is kept in memory: a restart starts it again. Default
	// [DefaultMaxGroupRegistrationsPerPrincipal].
	MaxGroupRegistrationsPerPrincipal int
	// GroupRegistrationWindow is the window of
	// MaxGroupRegistrationsPerPrincipal. Default
	// [DefaultGroupRegistrationWindow].
	GroupRegistrationWindow time.Duration
	// MaxShards is the most shards a stream may have here: no create, scale
	// or autoscaling policy goes past it. Default protocol.MaxShardCount.
	MaxShards int
	// AutoscaleInterval is how often a stream with an autoscaling policy
	// (mode on or dry-run) samples its shards in Redis and decides.
	// Default [DefaultAutoscaleInterval].
	AutoscaleInterval time.Duration
	// ShardMemory, when set, reads shard keys' MEMORY USAGE for the
	// autoscaling policies' memory bounds; without it a policy with a
	// memory bound decides nothing.
	ShardMemory ShardMemory

	// WarnInterval is how often, at most, one cause of a repeated warning
	// is logged (a second process heartbeating with a live member's id,
	// refused registrations): the first is logged at once, later ones at
	// most once per interval with the number held back. Default
	// [ratelog.DefaultInterval].
	WarnInterval time.Duration
}

// DefaultMaxHeldHeartbeats is [Config.MaxHeldHeartbeats] when unset.
const DefaultMaxHeldHeartbeats = 65536

// EnsureDefaults returns c with zero fields set to their defaults.
func (c Config) EnsureDefaults() Config {
	c.Group = c.Group.EnsureDefaults()
	if c.DefaultShards == 0 {
		c.DefaultShards = protocol.DefaultShardCount
	}
	if c.AskTimeout <= 0 {
		c.AskTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.ProducerRoutingLease == 0 {
		c.ProducerRoutingLease = 60 * time.Second
	}
	if c.DrainCheckInterval <= 0 {
		c.DrainCheckInterval = 5 * time.Second
	}
	if c.RedisTimeout <= 0 {
		c.RedisTimeout = 5 * time.Second
	}
	if c.MaxHeldHeartbeats == 0 {
		c.MaxHeldHeartbeats = DefaultMaxHeldHeartbeats
	}
	if c.MaxGroupsPerStream == 0 {
		c.MaxGroupsPerStream = DefaultMaxGroupsPerStream
	}
	if c.MaxGroupRegistrationsPerPrincipal == 0 {
		c.MaxGroupRegistrationsPerPrincipal = DefaultMaxGroupRegistrationsPerPrincipal
	}
	if c.GroupRegistrationWindow == 0 {
		c.GroupRegistrationWindow = DefaultGroupRegistrationWindow
	}
	if c.WarnInterval == 0 {
		c.WarnInterval = ratelog.DefaultInterval
	}
	if c.MaxShards == 0 {
		c.MaxShards = protocol.MaxShardCount
	}
	if c.AutoscaleInterval == 0 {
		c.AutoscaleInterval = DefaultAutoscaleInterval
	}
	return c
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("a store is required"))
	}
	if c.DefaultShards < 1 || c.DefaultShards > protocol.MaxShardCount {
		errs = append(errs, fmt.Errorf("default shard count %d is outside 1..%d", c.DefaultShards, protocol.MaxShardCount))
	}
	if c.MaxShards < 1 || c.MaxShards > protocol.MaxShardCount || c.DefaultShards > c.MaxShards {
		errs = append(errs, fmt.Errorf("max shards %d must be between the default shard count %d and %d", c.MaxShards, c.DefaultShards, protocol.MaxShardCount))
	}
	if c.AutoscaleInterval < 0 {
		errs = append(errs, fmt.Errorf("autoscale interval %v must not be negative", c.AutoscaleInterval))
	}
	g := c.Group
	if g.MemberLease <= g.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("member lease %v must be longer than the heartbeat interval %v", g.MemberLease, g.HeartbeatInterval))
	}
	if g.ReconcileInterval > g.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("reconcile interval %v must not exceed the heartbeat interval %v", g.ReconcileInterval, g.HeartbeatInterval))
	}
	if c.MaxHeldHeartbeats < 0 {
		errs = append(errs, fmt.Errorf("max held heartbeats %d must not be negative", c.MaxHeldHeartbeats))
	}
	if c.MaxGroupsPerStream < 0 {
		errs = append(errs, fmt.Errorf("max groups per stream %d must not be negative", c.MaxGroupsPerStream))
	}
	if c.MaxGroupRegistrationsPerPrincipal < 0 {
		errs = append(errs, fmt.Errorf("max group registrations per principal %d must not be negative", c.MaxGroupRegistrationsPerPrincipal))
	}
	if c.GroupRegistrationWindow < 0 {
		errs = append(errs, fmt.Errorf("group registration window %v must not be negative", c.GroupRegistrationWindow))
	}
	if c.WarnInterval < 0 {
		errs = append(errs, fmt.Errorf("warn interval %v must not be negative", c.WarnInterval))
	}
	if c.ProducerRoutingLease < 0 {
		errs = append(errs, fmt.Errorf("producer routing lease %v must not be negative", c.ProducerRoutingLease))
	}
	if c.Redis != nil && c.RedisTimeout >= c.AskTimeout {
		errs = append(errs, fmt.Errorf("redis timeout %v must be shorter than the ask timeout %v", c.RedisTimeout, c.AskTimeout))
	}
	return errors.Join(errs...)
}
