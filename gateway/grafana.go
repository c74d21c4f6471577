package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// Flat rows for Grafana's JSON data sources (docs/protocol.md §5, as in the
// reference design): one JSON array of flat objects per endpoint, filtered
// by the optional query parameters streamPrefix and consumerGroup, so that
// a dashboard variable can narrow every panel. Options endpoints answer
// [{"__text","__value"}] for variable pickers.

// GrafanaGroupRow is one group.
type GrafanaGroupRow struct {
	// StreamPrefix is the group's stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group.
	ConsumerGroup string `json:"consumerGroup"`
	// State is EMPTY, RECONCILING or STABLE.
	State string `json:"state"`
	// GroupEpoch is the group's epoch, as in GroupResponse.
	GroupEpoch int64 `json:"groupEpoch"`
	// AssignmentEpoch is the epoch of the group's target assignment.
	AssignmentEpoch int64 `json:"assignmentEpoch"`
	// MetadataVersion is the group's metadata version.
	MetadataVersion int64 `json:"metadataVersion"`
	// ShardCount is the number of shards producers route to, draining
	// ones not counted.
	ShardCount int `json:"shardCount"`
	// Members is the number of live (ACTIVE or STARTING) members.
	Members int `json:"members"`
	// ActiveMigration is "<reshardingId> <state>" of the stream's
	// migration in progress, "" when there is none.
	ActiveMigration string `json:"activeMigration"`

	// The reference design's columns. ActiveMembers is Members;
	// TotalMembers counts terminal members too.
	ActiveMembers int `json:"activeMembers"`
	TotalMembers  int `json:"totalMembers"`
	// CurrentShards and TargetShards sum the shards members report and
	// are targeted; AssignedShardRatio is "current / shardCount".
	CurrentShards      int    `json:"currentShards"`
	TargetShards       int    `json:"targetShards"`
	AssignedShardRatio string `json:"assignedShardRatio"`
	RevokingShards     int    `json:"revokingShards"`
	// The totals sum the group's shards as Redis shows them; TotalLag is
	// null when some lag is unknown or Redis could not be read.
	TotalStreamLength int64  `json:"totalStreamLength"`
	TotalPendingCount int64  `json:"totalPendingCount"`
	TotalLag          *int64 `json:"totalLag"`
	// ProducedPerSecond and ConsumedPerSecond sum the shards' rates
	// between this read and an earlier one; null until two reads a
	// second apart.
	ProducedPerSecond     *float64 `json:"producedPerSecond"`
	ConsumedPerSecond     *float64 `json:"consumedPerSecond"`
	TotalMemoryUsageBytes int64    `json:"totalMemoryUsageBytes"`
	MemoryUsageKnown      bool     `json:"memoryUsageKnown"`
}

// GrafanaMemberRow is one member of one group.
type GrafanaMemberRow struct {
	// StreamPrefix is the group's stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group.
	ConsumerGroup string `json:"consumerGroup"`
	// MemberID is the member's id.
	MemberID string `json:"memberId"`
	// MemberName is the memberName it last sent.
	MemberName string `json:"memberName"`
	// State is the member's state; terminal members are listed until
	// pruned.
	State string `json:"state"`
	// MemberEpoch is the member's epoch; -1 while LEAVING.
	MemberEpoch int64 `json:"memberEpoch"`
	// CurrentShards is how many shards it last reported owning.
	CurrentShards int `json:"currentShards"`
	// Current lists those shard indexes, comma-separated, ascending.
	Current string `json:"current"`
	// Revoking lists the shards it is still giving up, comma-separated,
	// ascending.
	Revoking string `json:"revoking"`
	// LastHeartbeat is when its last heartbeat was recorded; null until it
	// heartbeats to the coordinator that loaded the group.
	LastHeartbeat *time.Time `json:"lastHeartbeatAt"`
	// LeaseExpiresAt is when its lease ends without another heartbeat;
	// null when unknown.
	LeaseExpiresAt *time.Time `json:"memberLeaseExpiresAt"`

	// The reference design's columns.
	MetadataVersion       int64 `json:"metadataVersion"`
	CurrentShardCount     int   `json:"currentShardCount"`
	RevokingShardCount    int   `json:"revokingShardCount"`
	RuntimeMaxConcurrency int   `json:"runtimeMaxConcurrency"`
	ActiveConsumerWorkers int   `json:"activeConsumerWorkers"`
	// ClientAddress, InstanceID and UserAgent say where it runs, Late
	// that its heartbeat is late (protocol.Member).
	ClientAddress string `json:"clientAddress"`
	InstanceID    string `json:"instanceId"`
	UserAgent     string `json:"userAgent"`
	Late          bool   `json:"late"`
}

// GrafanaAssignmentRow is one shard of one group: its target owner and
// who reports reading or revoking it.
type GrafanaAssignmentRow struct {
	// StreamPrefix is the group's stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group.
	ConsumerGroup string `json:"consumerGroup"`
	// Shard is the shard's index. Only shards some member targets, holds
	// or gives up have a row.
	Shard int `json:"shard"`
	// StreamKey is the shard's Redis key.
	StreamKey string `json:"streamKey"`
	// Target lists the members whose target holds the shard, sorted and
	// comma-separated (one when healthy); "" when none.
	Target string `json:"target"`
	// Current lists the members that report owning the shard, sorted and
	// comma-separated.
	Current string `json:"current"`
	// Revoking lists the members still giving the shard up, sorted and
	// comma-separated.
	Revoking string `json:"revoking"`
	// Settled is true when Current equals Target and nobody is giving the
	// shard up.
	Settled bool `json:"settled"`

	// The reference design's names of Shard, Target, Current and Revoking.
	ShardIndex     int    `json:"shardIndex"`
	TargetOwners   string `json:"targetOwners"`
	CurrentOwners  string `json:"currentOwners"`
	RevokingOwners string `json:"revokingOwners"`
}

// GrafanaOption is one value of a dashboard variable.
type GrafanaOption struct {
	// Text is the label the picker shows; the same as Value.
	Text string `json:"__text"`
	// Value is the stream prefix, group name or shard index the variable
	// takes.
	Value string `json:"__value"`
}

// groupsFor lists the groups the query selects.
func (s *server) groupsFor(c *gin.Context) ([]protocol.GroupResponse, bool) {
	all, err := s.coord.Groups(c.Request.Context())
	if err != nil {
		s.writeError(c, err)
		return nil, false
	}
	prefix, group := c.Query("streamPrefix"), c.Query("consumerGroup")
	out := all.Groups[:0]
	for _, g := range all.Groups {
		if (prefix == "" || g.StreamPrefix == prefix) && (group == "" || g.ConsumerGroup == group) {
			out = append(out, g)
		}
	}
	return out, true
}

func (s *server) grafanaGroups(c *gin.Context) {
	groups, ok := s.groupsFor(c)
	if !ok {
		return
	}
	rows := make([]GrafanaGroupRow, 0, len(groups))
	for _, g := range groups {
		rows = append(rows, s.groupRow(c.Request.Context(), g))
	}
	c.JSON(http.StatusOK, rows)
}

// groupRow is g's row; the columns read from Redis stay zero (lag and
// rates null, memory unknown) when Redis cannot be read.
func (s *server) groupRow(ctx context.Context, g protocol.GroupResponse) GrafanaGroupRow {
	row := GrafanaGroupRow{
		StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup, State: string(g.State),
		GroupEpoch: g.GroupEpoch, AssignmentEpoch: g.AssignmentEpoch, MetadataVersion: g.MetadataVersion,
		ShardCount: g.ShardCount, Members: len(g.TargetAssignmentSummary), ActiveMembers: len(g.TargetAssignmentSummary),
	}
	if g.ActiveMigration != nil {
		row.ActiveMigration = g.ActiveMigration.ReshardingID + " " + string(g.ActiveMigration.State)
	}
	for _, n := range g.CurrentAssignmentSummary {
		row.CurrentShards += n
	}
	for _, n := range g.TargetAssignmentSummary {
		row.TargetShards += n
	}
	row.AssignedShardRatio = fmt.Sprintf("%d / %d", row.CurrentShards, g.ShardCount)
	if ms, err := s.coord.Members(ctx, g.StreamPrefix, g.ConsumerGroup); err == nil {
		row.TotalMembers = len(ms.Members)
		for _, m := range ms.Members {
			row.RevokingShards += len(m.Revoking)
		}
	}
	v, err := s.readShardView(ctx, g)
	if err != nil {
		return row
	}
	totals := protocol.OffsetsResponse{Shards: v.offsets}
	offsetTotals(&totals)
	row.TotalStreamLength, row.TotalPendingCount, row.TotalLag = totals.TotalStreamLength, totals.TotalPendingCount, totals.TotalLag
	row.TotalMemoryUsageBytes, row.MemoryUsageKnown = totals.TotalMemoryUsageBytes, totals.MemoryUsageKnown
	row.ProducedPerSecond, row.ConsumedPerSecond = sumRates(v.rates)
	return row
}

// sumRates sums the known rates; a sum is null when no shard's is known.
func sumRates(rates map[int]shardRate) (produced, consumed *float64) {
	add := func(sum **float64, v *float64) {
		if v == nil {
			return
		}
		if *sum == nil {
			*sum = new(float64)
		}
		**sum += *v
	}
	for _, r := range rates {
		add(&produced, r.produced)
		add(&consumed, r.consumed)
	}
	return produced, consumed
}

func (s *server) grafanaMembers(c *gin.Context) {
	groups, ok := s.groupsFor(c)
	if !ok {
		return
	}
	rows := []GrafanaMemberRow{}
	for _, g := range groups {
		ms, err := s.coord.Members(c.Request.Context(), g.StreamPrefix, g.ConsumerGroup)
		if err != nil {
			continue // deleted or failed closed since the list: leave it out
		}
		for _, m := range ms.Members {
			rows = append(rows, GrafanaMemberRow{
				StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup, MemberID: m.MemberID,
				MemberName: m.MemberName, State: string(m.State), MemberEpoch: m.MemberEpoch,
				CurrentShards: len(m.CurrentAssignment), Current: joinShards(m.CurrentAssignment),
				Revoking: joinShards(m.Revoking), LastHeartbeat: m.LastHeartbeatAt, LeaseExpiresAt: m.MemberLeaseExpiresAt,
				MetadataVersion: m.MetadataVersion, CurrentShardCount: len(m.CurrentAssignment), RevokingShardCount: len(m.Revoking),
				RuntimeMaxConcurrency: m.RuntimeMaxConcurrency, ActiveConsumerWorkers: m.ActiveConsumerWorkers,
				ClientAddress: m.ClientAddress, InstanceID: m.InstanceID, UserAgent: m.UserAgent, Late: m.Late,
			})
		}
	}
	c.JSON(http.StatusOK, rows)
}

func (s *server) grafanaAssignments(c *gin.Context) {
	groups, ok := s.groupsFor(c)
	if !ok {
		return
	}
	rows := []GrafanaAssignmentRow{}
	for _, g := range groups {
		as, err := s.coord.Assignments(c.Request.Context(), g.StreamPrefix, g.ConsumerGroup)
		if err != nil {
			continue
		}
		rows = append(rows, assignmentRows(g, as)...)
	}
	c.JSON(http.StatusOK, rows)
}

// assignmentRows turns a group's member → shards maps into one row per shard.
func assignmentRows(g protocol.GroupResponse, as protocol.AssignmentsResponse) []GrafanaAssignmentRow {
	type who struct{ target, current, revoking []string }
	byShard := map[int]*who{}
	at := func(s int) *who {
		if byShard[s] == nil {
			byShard[s] = &who{}
		}
		return byShard[s]
	}
	for m, shards := range as.TargetAssignment {
		for _, s := range shards {
			at(s.ShardIndex).target = append(at(s.ShardIndex).target, m)
		}
	}
	for m, shards := range as.CurrentAssignments {
		for _, s := range shards {
			at(s.ShardIndex).current = append(at(s.ShardIndex).current, m)
		}
	}
	for m, shards := range as.RevokeProgress {
		for _, s := range shards {
			at(s.ShardIndex).revoking = append(at(s.ShardIndex).revoking, m)
		}
	}
	// Every live shard has a row, as in the reference design, even one
	// nobody targets or reads.
	for i := range g.ShardCount {
		at(i)
	}
	indexes := make([]int, 0, len(byShard))
	for s := range byShard {
		indexes = append(indexes, s)
	}
	sort.Ints(indexes)
	rows := make([]GrafanaAssignmentRow, 0, len(indexes))
	for _, s := range indexes {
		w := byShard[s]
		for _, l := range [][]string{w.target, w.current, w.revoking} {
			sort.Strings(l)
		}
		target, current := strings.Join(w.target, ","), strings.Join(w.current, ",")
		revoking := strings.Join(w.revoking, ",")
		rows = append(rows, GrafanaAssignmentRow{
			StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup, Shard: s,
			StreamKey: protocol.StreamKey(g.StreamPrefix, s), Target: target, Current: current,
			Revoking: revoking, Settled: target == current && len(w.revoking) == 0,
			ShardIndex: s, TargetOwners: target, CurrentOwners: current, RevokingOwners: revoking,
		})
	}
	return rows
}

func joinShards(shards []protocol.Shard) string {
	parts := make([]string, len(shards))
	for i, s := range shards {
		parts[i] = strconv.Itoa(s.ShardIndex)
	}
	return strings.Join(parts, ",")
}

// grafanaStreamOptions lists the stream prefixes.
func (s *server) grafanaStreamOptions(c *gin.Context) {
	s.grafanaOptions(c, func(g protocol.GroupResponse) string { return g.StreamPrefix })
}

// grafanaGroupOptions lists the groups (of streamPrefix, when given).
func (s *server) grafanaGroupOptions(c *gin.Context) {
	s.grafanaOptions(c, func(g protocol.GroupResponse) string { return g.ConsumerGroup })
}

// grafanaOptions answers the distinct values of field over the selected
// groups, in their order.
func (s *server) grafanaOptions(c *gin.Context, field func(protocol.GroupResponse) string) {
	groups, ok := s.groupsFor(c)
	if !ok {
		return
	}
	seen := map[string]bool{}
	out := []GrafanaOption{}
	for _, g := range groups {
		if v := field(g); !seen[v] {
			seen[v] = true
			out = append(out, GrafanaOption{Text: v, Value: v})
		}
	}
	c.JSON(http.StatusOK, out)
}

// grafanaShardOptions lists the shard indexes of the selected streams.
func (s *server) grafanaShardOptions(c *gin.Context) {
	groups, ok := s.groupsFor(c)
	if !ok {
		return
	}
	most := 0
	for _, g := range groups {
		most = max(most, g.ShardCount)
	}
	out := make([]GrafanaOption, most)
	for i := range out {
		v := strconv.Itoa(i)
		out[i] = GrafanaOption{Text: v, Value: v}
	}
	c.JSON(http.StatusOK, out)
}
