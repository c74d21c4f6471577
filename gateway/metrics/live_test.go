package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

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
	m.SetMemberLiveness([]metrics.MemberLiveness{{Stream: "s", Group: "g", Member: "a", LastHeartbeat: now, LeaseExpires: now.Add(15 * time.Second)}})
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
	for _, name := range []string{metrics.BuildInfo, metrics.ShardLengthRecords, metrics.ShardPendingRecords, metrics.ShardLagRecords,
		metrics.MemberHeartbeatAgeSeconds, metrics.MemberLeaseRemainingSeconds, metrics.MemberSeriesCapped, metrics.RedisUp,
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

func TestLiveSeries(t *testing.T) {
	now := time.Now()
	lag := int64(25)
	zero := int64(0)
	cases := []struct {
		name       string
		max        int
		shards     []metrics.ShardStat
		members    []metrics.MemberLiveness
		wantLag    int
		wantMember int
		wantCapped string
	}{
		{name: "lag unknown is absent", max: 10,
			shards:  []metrics.ShardStat{{Stream: "s", Group: "g", Shard: 0, Length: 5, Pending: &zero}, {Stream: "s", Group: "g", Shard: 1, Length: 25, Pending: &zero, Lag: &lag}},
			wantLag: 1, wantCapped: "0"},
		{name: "cap keeps the oldest heartbeats", max: 2,
			members: []metrics.MemberLiveness{
				{Stream: "s", Group: "g", Member: "new", LastHeartbeat: now, LeaseExpires: now.Add(15 * time.Second)},
				{Stream: "s", Group: "g", Member: "old", LastHeartbeat: now.Add(-10 * time.Second), LeaseExpires: now.Add(5 * time.Second)},
				{Stream: "s", Group: "g", Member: "mid", LastHeartbeat: now.Add(-5 * time.Second), LeaseExpires: now.Add(10 * time.Second)},
			},
			wantMember: 2, wantCapped: "1"},
		{name: "cap 0 exports no member", max: 0,
			members:    []metrics.MemberLiveness{{Stream: "s", Group: "g", Member: "a", LastHeartbeat: now, LeaseExpires: now}},
			wantMember: 0, wantCapped: "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := metrics.New(metrics.WithMaxMembers(c.max))
			m.SetShardStats(c.shards)
			m.SetMemberLiveness(c.members)
			if got := testutil.CollectAndCount(m.Registry(), metrics.ShardLagRecords); got != c.wantLag {
				t.Errorf("lag series %d, want %d", got, c.wantLag)
			}
			if got := testutil.CollectAndCount(m.Registry(), metrics.MemberHeartbeatAgeSeconds); got != c.wantMember {
				t.Errorf("heartbeat age series %d, want %d", got, c.wantMember)
			}
			want := "# HELP rscoord_member_series_capped Members left out of the per-member gauges at the last collection by --metrics-max-members.\n# TYPE rscoord_member_series_capped gauge\nrscoord_member_series_capped " + c.wantCapped + "\n"
			if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), metrics.MemberSeriesCapped); err != nil {
				t.Error(err)
			}
			if c.name == "cap keeps the oldest heartbeats" {
				out, err := testutil.CollectAndFormat(m.Registry(), expfmt.TypeTextPlain, metrics.MemberHeartbeatAgeSeconds)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(out), `member="new"`) || !strings.Contains(string(out), `member="old"`) {
					t.Errorf("the cap kept the wrong members:\n%s", out)
				}
			}
		})
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
