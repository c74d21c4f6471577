package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/version"
)

// TestPromlintClean runs client_golang's linter over everything the
// registry exports, with every live series present.
func TestPromlintClean(t *testing.T) {
	m := metrics.New()
	lag, pending := int64(3), int64(1)
	now := time.Now()
	m.SetShardStats([]metrics.ShardStat{{Stream: "s", Group: "g", Shard: 0, Length: 4, Pending: &pending, Lag: &lag}})
	m.SetShardMemory([]metrics.ShardMemory{{Stream: "s", Shard: 0, Bytes: 1024}})
	m.SetLiveSource(liveGroups{{Stream: "s", Group: "g", Shards: []int{0, 1}, Members: []actors.LiveMember{
		{ID: "a", State: protocol.MemberActive, LastHeartbeat: now, LeaseExpires: now.Add(15 * time.Second), Current: []int{0}, MaxConcurrency: 4}}}})
	up := true
	m.CollectionDone(&up, time.Millisecond, 0)
	m.SetClusterReplicasLive(3)
	m.SetClusterGroupsUnowned(0)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "member" && !metrics.MemberLabelled(f.GetName()) {
					t.Errorf("%s carries a member label but MemberLabelled does not say so", f.GetName())
				}
			}
		}
	}
	for _, name := range []string{metrics.BuildInfo, metrics.ShardLengthRecords, metrics.ShardPendingRecords, metrics.ShardLagRecords,
		metrics.MemberHeartbeatAgeSeconds, metrics.MemberLeaseRemainingSeconds, metrics.MemberSeriesCapped, metrics.RedisUp,
		metrics.ShardMemoryBytes, metrics.MemberCurrentShards, metrics.MemberRevokingShards, metrics.MemberMaxConcurrency,
		metrics.MemberAvailableConcurrency, metrics.ShardOwner, metrics.GroupUnownedShards,
		metrics.CollectionDurationSeconds, metrics.CollectionErrorsTotal, metrics.ClusterReplicasLive, metrics.ClusterGroupsUnowned} {
		if n := testutil.CollectAndCount(m.Registry(), name); n == 0 {
			t.Errorf("%s is not exported", name)
		}
	}
}

// TestLabelledCountersStartAtZero: every labelled counter has its series
// before its first event.
func TestLabelledCountersStartAtZero(t *testing.T) {
	m := metrics.New()
	cases := []struct {
		name string
		want int // series
	}{
		{"rscoord_heartbeats_total", 8},
		{"rscoord_group_steps_total", 8},
		{"rscoord_store_write_errors_total", 3},
		{"rscoord_store_write_duration_seconds", 3},
		{"rscoord_producer_routing_requests_total", 23},
		{"rscoord_admin_mutations_total", 12},
		{"rscoord_admin_mutation_failures_total", 6 * 22},
		{"rscoord_rate_limit_refusals_total", 4}, // admin, login, logout, body_memory
		{"rscoord_member_limit_refusals_total", 1},
		{"rscoord_auth_refusals_total", 2},
	}
	for _, c := range cases {
		if got := testutil.CollectAndCount(m.Registry(), c.name); got < c.want {
			t.Errorf("%s has %d series before any event, want at least %d", c.name, got, c.want)
		}
	}
}

// liveGroups is a fixed [metrics.LiveSource].
type liveGroups []actors.LiveGroup

func (l liveGroups) LiveGroups() []actors.LiveGroup { return l }

func TestLiveSeries(t *testing.T) {
	now := time.Now()
	lag := int64(25)
	zero := int64(0)
	member := func(id string, state protocol.MemberState, age time.Duration) actors.LiveMember {
		return actors.LiveMember{ID: id, State: state, LastHeartbeat: now.Add(-age), LeaseExpires: now.Add(15*time.Second - age)}
	}
	cases := []struct {
		name       string
		max        int
		shards     []metrics.ShardStat
		members    []actors.LiveMember
		wantLag    int
		wantMember int
		wantCapped string
	}{
		{name: "lag unknown is absent", max: 10,
			shards:  []metrics.ShardStat{{Stream: "s", Group: "g", Shard: 0, Length: 5, Pending: &zero}, {Stream: "s", Group: "g", Shard: 1, Length: 25, Pending: &zero, Lag: &lag}},
			wantLag: 1, wantCapped: "0"},
		{name: "cap keeps the oldest heartbeats", max: 2,
			members: []actors.LiveMember{
				member("new", protocol.MemberActive, 0),
				member("old", protocol.MemberExpired, 20*time.Second),
				member("mid", protocol.MemberActive, 5*time.Second),
			},
			wantMember: 2, wantCapped: "1"},
		{name: "cap 0 exports no member", max: 0,
			members:    []actors.LiveMember{member("a", protocol.MemberActive, 0)},
			wantMember: 0, wantCapped: "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := metrics.New(metrics.WithMaxMembers(c.max))
			m.SetShardStats(c.shards)
			m.SetLiveSource(liveGroups{{Stream: "s", Group: "g", Members: c.members}})
			if got := testutil.CollectAndCount(m.Registry(), metrics.ShardLagRecords); got != c.wantLag {
				t.Errorf("lag series %d, want %d", got, c.wantLag)
			}
			if got := testutil.CollectAndCount(m.Registry(), metrics.MemberHeartbeatAgeSeconds); got != c.wantMember {
				t.Errorf("heartbeat age series %d, want %d", got, c.wantMember)
			}
			want := "# HELP rscoord_member_series_capped Members left out of the per-member gauges at this scrape by --metrics-max-members.\n# TYPE rscoord_member_series_capped gauge\nrscoord_member_series_capped " + c.wantCapped + "\n"
			if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), metrics.MemberSeriesCapped); err != nil {
				t.Error(err)
			}
			if c.name == "cap keeps the oldest heartbeats" {
				out, err := testutil.CollectAndFormat(m.Registry(), expfmt.TypeTextPlain, metrics.MemberHeartbeatAgeSeconds)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(out), `member="new"`) || !strings.Contains(string(out), `member="old",state="EXPIRED"`) {
					t.Errorf("the cap kept the wrong members, or lost the state:\n%s", out)
				}
			}
		})
	}
}

// TestOwnershipSeries: every shard a member reads has its owner series,
// a shard being given up is held but has no owner, and the rest are
// counted unowned; expired members keep their series with their state.
func TestOwnershipSeries(t *testing.T) {
	now := time.Now()
	m := metrics.New()
	m.SetLiveSource(liveGroups{{Stream: "s", Group: "g", Shards: []int{0, 1, 2, 3, 5}, Members: []actors.LiveMember{
		{ID: "a", State: protocol.MemberActive, LastHeartbeat: now, LeaseExpires: now.Add(time.Second), Current: []int{0, 5}, Revoking: []int{1},
			MaxConcurrency: 8, AvailableConcurrency: 3},
		{ID: "b", State: protocol.MemberExpired, LastHeartbeat: now.Add(-time.Minute), LeaseExpires: now.Add(-time.Second)},
	}}})
	want := `# HELP rscoord_group_unowned_shards Readable shards of the group that no member reads or is giving up.
# TYPE rscoord_group_unowned_shards gauge
rscoord_group_unowned_shards{group="g",stream="s"} 2
# HELP rscoord_member_available_concurrency Workers the member last reported free (availableConcurrency).
# TYPE rscoord_member_available_concurrency gauge
rscoord_member_available_concurrency{group="g",member="a",state="ACTIVE",stream="s"} 3
rscoord_member_available_concurrency{group="g",member="b",state="EXPIRED",stream="s"} 0
# HELP rscoord_member_current_shards Shards the member reported reading, accepted.
# TYPE rscoord_member_current_shards gauge
rscoord_member_current_shards{group="g",member="a",state="ACTIVE",stream="s"} 2
rscoord_member_current_shards{group="g",member="b",state="EXPIRED",stream="s"} 0
# HELP rscoord_member_max_concurrency Workers the member last reported it runs at most (runtimeMaxConcurrency).
# TYPE rscoord_member_max_concurrency gauge
rscoord_member_max_concurrency{group="g",member="a",state="ACTIVE",stream="s"} 8
rscoord_member_max_concurrency{group="g",member="b",state="EXPIRED",stream="s"} 0
# HELP rscoord_member_revoking_shards Shards the member reported giving up and not yet released.
# TYPE rscoord_member_revoking_shards gauge
rscoord_member_revoking_shards{group="g",member="a",state="ACTIVE",stream="s"} 1
rscoord_member_revoking_shards{group="g",member="b",state="EXPIRED",stream="s"} 0
# HELP rscoord_shard_owner 1 for each member the group accepted as reading the shard (its current assignment); a shard no member reads has no series.
# TYPE rscoord_shard_owner gauge
rscoord_shard_owner{group="g",member="a",shard="0",stream="s"} 1
rscoord_shard_owner{group="g",member="a",shard="5",stream="s"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), metrics.GroupUnownedShards, metrics.MemberAvailableConcurrency,
		metrics.MemberCurrentShards, metrics.MemberMaxConcurrency, metrics.MemberRevokingShards, metrics.ShardOwner); err != nil {
		t.Error(err)
	}
}

// TestBuildInfoNamesTheBuild checks rscoord_build_info's labels: the
// version internal/version reports (never "devel") and its revision, or
// the version WithVersion gives.
func TestBuildInfoNamesTheBuild(t *testing.T) {
	build := version.Get()
	for _, tt := range []struct {
		name string
		opts []metrics.Option
		want string
	}{
		{name: "default", want: build.Version},
		{name: "WithVersion", opts: []metrics.Option{metrics.WithVersion("1.2.3")}, want: "1.2.3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New(tt.opts...)
			want := fmt.Sprintf("# HELP %s Always 1; the labels say which build runs.\n# TYPE %s gauge\n%s{goversion=%q,revision=%q,version=%q} 1\n",
				metrics.BuildInfo, metrics.BuildInfo, metrics.BuildInfo, build.GoVersion, build.Revision, tt.want)
			if err := testutil.CollectAndCompare(m.Registry(), strings.NewReader(want), metrics.BuildInfo); err != nil {
				t.Error(err)
			}
		})
	}
}
