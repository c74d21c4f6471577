package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
	"github.com/rscoord/rscoord/redisops"
)

// referenceQueries are the Prometheus queries of the reference design's
// four Grafana dashboards, with their variables as the dashboards expand
// them for stream "orders", group "orders", shard 0 and every API route.
var referenceQueries = []string{
	`max(last_over_time(redis_stream_coord_api_request_duration_seconds{quantile="0.95", stream=~"$streamPrefix", group=~"$consumerGroup", route=~"$apiRoute"}[5m]))`,
	`max(last_over_time(redis_stream_coord_api_request_duration_seconds_max{stream=~"$streamPrefix", group=~"$consumerGroup", route=~"$apiRoute"}[5m]))`,
	`max by (route) (last_over_time(redis_stream_coord_api_request_duration_seconds{quantile="0.95", stream=~"$streamPrefix", group=~"$consumerGroup", route=~"$apiRoute"}[5m]))`,
	`max by (route) (last_over_time(redis_stream_coord_api_request_duration_seconds_max{stream=~"$streamPrefix", group=~"$consumerGroup", route=~"$apiRoute"}[5m]))`,
	`sum by (route, status) (rate(redis_stream_coord_api_request_duration_seconds_count{stream=~"$streamPrefix", group=~"$consumerGroup", route=~"$apiRoute"}[2m]))`,
	`last_over_time(redis_stream_coord_up[$__range])`,
	`sum(last_over_time(redis_stream_coord_members{state="active"}[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_stream_length[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_memory_usage_bytes[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_lag[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_pending[$__range]))`,
	`sum by (stream, group) (last_over_time(redis_stream_coord_shard_lag[$__range]))`,
	`sum by (stream, group) (last_over_time(redis_stream_coord_shard_stream_length[$__range]))`,
	`sum by (stream, group) (last_over_time(redis_stream_coord_shard_memory_usage_bytes[$__range]))`,
	`sum by (stream) (max by (stream, shard) (clamp_min(deriv(redis_stream_coord_shard_stream_length[2m]), 0)))`,
	`sum by (stream) (clamp_min(deriv(redis_stream_coord_shard_stream_length[2m]) - deriv(redis_stream_coord_shard_lag[2m]), 0))`,
	`sum(last_over_time(redis_stream_coord_members{state="active", stream=~"$streamPrefix", group=~"$consumerGroup"}[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_stream_length{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_memory_usage_bytes{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_lag{stream=~"$streamPrefix", group=~"$consumerGroup"}[$__range]))`,
	`sum(last_over_time(redis_stream_coord_shard_pending{stream=~"$streamPrefix", group=~"$consumerGroup"}[$__range]))`,
	`last_over_time(redis_stream_coord_shard_lag{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[$__range])`,
	`last_over_time(redis_stream_coord_shard_stream_length{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[$__range])`,
	`last_over_time(redis_stream_coord_shard_memory_usage_bytes{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[$__range])`,
	`rate(redis_stream_coord_heartbeat_total{stream=~"$streamPrefix", group=~"$consumerGroup"}[2m])`,
	`last_over_time(redis_stream_coord_member_heartbeat_age_seconds{stream=~"$streamPrefix", group=~"$consumerGroup"}[$__range])`,
	`last_over_time(redis_stream_coord_revoke_pending{stream=~"$streamPrefix", group=~"$consumerGroup"}[$__range])`,
	`last_over_time(redis_stream_coord_migration_active{stream=~"$streamPrefix", group=~"$consumerGroup"}[$__range])`,
	`last_over_time(redis_stream_coord_invariant_violations{stream=~"$streamPrefix", group=~"$consumerGroup"}[$__range])`,
	`sum by (shard) (clamp_min(deriv(redis_stream_coord_shard_stream_length{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[2m]), 0))`,
	`sum by (shard) (clamp_min(deriv(redis_stream_coord_shard_stream_length{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[2m]) - deriv(redis_stream_coord_shard_lag{stream=~"$streamPrefix", group=~"$consumerGroup", shard=~"$shardIndex"}[2m]), 0))`,
	// The API dashboard's route variable.
	`redis_stream_coord_api_request_duration_seconds_count`,
}

// referenceTables are the JSON tables of the reference design's
// dashboards: each URL (under /coord/v1/monitoring/grafana) with the
// columns its Infinity panel or HTML panel selects.
var referenceTables = []struct {
	path    string
	columns []string
}{
	{"/groups", []string{"streamPrefix", "consumerGroup", "assignedShardRatio", "activeMembers", "totalLag", "producedPerSecond",
		"consumedPerSecond", "totalPendingCount", "totalStreamLength", "totalMemoryUsageBytes", "state", "memoryUsageKnown"}},
	{"/shards?streamPrefix=&consumerGroup=", referenceShardColumns},
	{"/shards?streamPrefix=orders&consumerGroup=orders", referenceShardColumns},
	{"/members?streamPrefix=orders&consumerGroup=orders", []string{"streamPrefix", "consumerGroup", "memberName", "memberId", "state",
		"activeConsumerWorkers", "currentShardCount", "revokingShardCount", "runtimeMaxConcurrency", "lastHeartbeatAt",
		"metadataVersion", "memberLeaseExpiresAt"}},
	{"/assignments?streamPrefix=orders&consumerGroup=orders", []string{"streamPrefix", "consumerGroup", "currentOwners",
		"targetOwners", "revokingOwners", "shardIndex"}},
	{"/messages?streamPrefix=orders&consumerGroup=orders&shardIndex=all&direction=BACKWARD&limit=25", referenceMessageColumns},
	{"/messages?streamPrefix=orders&consumerGroup=orders&shardIndex=0&direction=BACKWARD&limit=25", referenceMessageColumns},
	{"/messages?streamPrefix=orders&consumerGroup=orders&shardIndex=all&limit=2&cursor=__rsc_tail__:0", referenceMessageColumns},
}

var (
	referenceShardColumns = []string{"streamPrefix", "consumerGroup", "shardCount", "shardLabel", "shardIndex", "streamKey",
		"redisNodeEndpoint", "currentOwnerMemberIds", "targetOwnerMemberIds", "ownerState", "lag", "producedPerSecond",
		"consumedPerSecond", "pendingCount", "streamLength", "memoryUsageBytes", "memoryUsageKnown", "groupLastDeliveredId",
		"consumerLastAckedId", "consumerLastDeliveredId", "firstRecordId"}
	referenceMessageColumns = []string{"recordTime", "recordTimestampMs", "shardLabel", "shardIndex", "streamKey", "recordId",
		"fieldsJson", "pageLimit", "pageNextCursor", "pageTotalMessages"}
)

// TestReferenceDashboardsFillOnALiveServer runs a coordinator with
// --reference-metrics, Redis, entries and two members, and checks every
// query and table of the reference design's dashboards against it: each
// query's selectors select series of /metrics, each table answers rows
// holding every column it selects.
func TestReferenceDashboardsFillOnALiveServer(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Redis: redisops.Wrap(rdb), ReferenceMetrics: true,
		Group: assign.Config{MemberLease: 10 * time.Minute}})
	s.CreateStream("orders", 2)
	for i := range 6 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: fmt.Sprintf("orders:%d", i%2), Values: []any{"payload", fmt.Sprint(i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := coordtest.NewMember("a", "orders", "orders"), coordtest.NewMember("b", "orders", "orders")
	coordtest.Converge(t, s, 6, a, b)
	collector.Round(ctx, collector.Config{Source: s.Coord, Sink: s.Metrics, Memory: collector.RedisMemory(rdb), Interval: 5 * time.Second, Timeout: 5 * time.Second})

	for _, tc := range referenceTables {
		status, raw := s.Do(http.MethodGet, "/coord/v1/monitoring/grafana"+tc.path, nil)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d %s", tc.path, status, raw)
			continue
		}
		var rows []map[string]any
		if err := json.Unmarshal(raw, &rows); err != nil || len(rows) == 0 {
			t.Errorf("GET %s: %v, %d rows: %s", tc.path, err, len(rows), raw)
			continue
		}
		for i, row := range rows {
			for _, col := range tc.columns {
				if _, ok := row[col]; !ok {
					t.Errorf("GET %s: row %d lacks %s", tc.path, i, col)
				}
			}
		}
		if tc.path == "/shards?streamPrefix=orders&consumerGroup=orders" && (rows[0]["memoryUsageBytes"] == nil || rows[0]["lag"] == nil) {
			t.Errorf("GET %s: the sampled memory and the lag are missing: %v", tc.path, rows[0])
		}
	}

	status, raw := s.Do(http.MethodGet, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("scrape: %d %s", status, raw)
	}
	scraped := parseScrape(t, raw)
	vars := strings.NewReplacer("$streamPrefix", "orders", "$consumerGroup", "orders", "$shardIndex", "0",
		"$apiRoute", ".*", "$__range", "5m")
	for _, q := range referenceQueries {
		queryCheck(t.Errorf, "reference dashboard", vars.Replace(q), scraped)
	}
	for _, l := range scraped["redis_stream_coord_api_request_duration_seconds_count"] {
		if strings.Contains(l["route"], ":") {
			t.Errorf("route label %q keeps gin's parameter syntax", l["route"])
		}
	}
}

// TestReferenceFamiliesOffByDefault: without the option no
// redis_stream_coord_* family is exported, and a heartbeat counted for
// them is not.
func TestReferenceFamiliesOffByDefault(t *testing.T) {
	m := metrics.New()
	m.GroupHeartbeat("orders", "orders", "OK")
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "redis_stream_coord_") {
			t.Errorf("%s exported without WithReferenceFamilies", f.GetName())
		}
	}
}

// parseScrape reads a text exposition into series by name, summaries as
// their quantile, _sum and _count series.
func parseScrape(t *testing.T, raw []byte) map[string][]series {
	t.Helper()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("scrape does not parse: %v", err)
	}
	out := map[string][]series{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			base := series{"__name__": name}
			for _, l := range m.GetLabel() {
				base[l.GetName()] = l.GetValue()
			}
			if sm := m.GetSummary(); sm != nil {
				for _, q := range sm.GetQuantile() {
					l := maps.Clone(base)
					l["quantile"] = fmt.Sprint(q.GetQuantile())
					out[name] = append(out[name], l)
				}
				for _, suffix := range []string{"_sum", "_count"} {
					l := maps.Clone(base)
					l["__name__"] = name + suffix
					out[name+suffix] = append(out[name+suffix], l)
				}
				continue
			}
			out[name] = append(out[name], base)
		}
	}
	return out
}
