package gateway

import (
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
		row := GrafanaGroupRow{
			StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup, State: string(g.State),
			GroupEpoch: g.GroupEpoch, AssignmentEpoch: g.AssignmentEpoch, MetadataVersion: g.MetadataVersion,
			ShardCount: g.ShardCount, Members: len(g.TargetAssignmentSummary),
		}
		if g.ActiveMigration != nil {
			row.ActiveMigration = g.ActiveMigration.ReshardingID + " " + string(g.ActiveMigration.State)
		}
		rows = append(rows, row)
	}
	c.JSON(http.StatusOK, rows)
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
		rows = append(rows, GrafanaAssignmentRow{
			StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup, Shard: s,
			StreamKey: protocol.StreamKey(g.StreamPrefix, s), Target: target, Current: current,
			Revoking: strings.Join(w.revoking, ","), Settled: target == current && len(w.revoking) == 0,
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

// GrafanaShardRow is one readable shard of one group, read live from Redis.
type GrafanaShardRow struct {
	// StreamPrefix is the group's stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group whose pending count and lag are shown.
	ConsumerGroup string `json:"consumerGroup"`
	// Shard is the shard's index.
	Shard int `json:"shard"`
	// StreamKey is the shard's Redis key.
	StreamKey string `json:"streamKey"`
	// RedisSlot is the Redis Cluster slot of StreamKey.
	RedisSlot int `json:"redisSlot"`
	// Draining is true for a removed shard of a scale-in not yet retired.
	Draining bool `json:"draining"`
	// Length is the number of entries in the stream; 0 when the key is
	// missing.
	Length int64 `json:"length"`
	// Pending is how many entries the group was delivered and has not
	// acknowledged; 0 when the key or its Redis consumer group is missing.
	Pending int64 `json:"pending"`
	// Lag is how many entries the group has not yet been delivered; null
	// when Redis cannot tell or the key or its Redis consumer group is
	// missing.
	Lag *int64 `json:"lag"`
	// LastGeneratedID is the id of the newest entry ever added; "" when
	// the key is missing.
	LastGeneratedID string `json:"lastGeneratedId"`
	// Owners lists the members that report owning the shard, sorted and
	// comma-separated.
	Owners string `json:"owners"`
}

// GrafanaMessageRow is one stream entry of one shard, with its fields as a
// JSON object.
type GrafanaMessageRow struct {
	// StreamPrefix is the stream read.
	StreamPrefix string `json:"streamPrefix"`
	// Shard is the shard read.
	Shard int `json:"shard"`
	// StreamKey is the shard's Redis key.
	StreamKey string `json:"streamKey"`
	// ID is the entry id ("ms-seq"); rows come newest first.
	ID string `json:"id"`
	// Fields are the entry's field-value pairs; values are strings.
	Fields map[string]any `json:"fields"`
}

func (s *server) grafanaShards(c *gin.Context) {
	groups, ok := s.groupsFor(c)
	if !ok {
		return
	}
	rows := []GrafanaShardRow{}
	for _, g := range groups {
		sh, err := s.coord.Shards(c.Request.Context(), g.StreamPrefix, g.ConsumerGroup)
		if err != nil {
			s.writeError(c, err) // Redis not configured or down: say so rather than show nothing
			return
		}
		for _, st := range sh.Shards {
			rows = append(rows, GrafanaShardRow{
				StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup, Shard: st.ShardIndex,
				StreamKey: st.StreamKey, RedisSlot: st.RedisSlot, Draining: st.Draining, Length: st.Length,
				Pending: st.Pending, Lag: st.Lag, LastGeneratedID: st.LastGeneratedID, Owners: strings.Join(st.Owners, ","),
			})
		}
	}
	c.JSON(http.StatusOK, rows)
}

// grafanaMessages shows the newest entries of one shard
// (?streamPrefix=&consumerGroup=&shard=&limit=).
func (s *server) grafanaMessages(c *gin.Context) {
	prefix := c.Query("streamPrefix")
	group := c.DefaultQuery("consumerGroup", prefix)
	shard, err := strconv.Atoi(c.Query("shard"))
	if prefix == "" || err != nil {
		abortWith(c, protocol.CodeInvalidRequest, "streamPrefix and a numeric shard are required")
		return
	}
	limit := 100
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			abortWith(c, protocol.CodeInvalidRequest, "limit must be an integer")
			return
		}
	}
	page, err := s.coord.Messages(c.Request.Context(), prefix, group, shard, "", limit, protocol.DirectionBackward)
	if err != nil {
		s.writeError(c, err)
		return
	}
	rows := make([]GrafanaMessageRow, len(page.Messages))
	for i, m := range page.Messages {
		rows[i] = GrafanaMessageRow{StreamPrefix: prefix, Shard: shard, StreamKey: page.StreamKey, ID: m.ID, Fields: m.Fields}
	}
	c.JSON(http.StatusOK, rows)
}
