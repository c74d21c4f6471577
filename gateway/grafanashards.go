package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

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

	// The reference design's columns. ShardCount is the group's live
	// shard count; ShardLabel is ":<shardIndex>".
	ShardCount int    `json:"shardCount"`
	ShardIndex int    `json:"shardIndex"`
	ShardLabel string `json:"shardLabel"`
	// RedisNodeEndpoint, RedisNodeID and the slot range are null: this
	// server does not map slots to Redis Cluster nodes.
	RedisNodeEndpoint   *string `json:"redisNodeEndpoint"`
	RedisNodeID         *string `json:"redisNodeId"`
	RedisSlotRangeStart *int    `json:"redisSlotRangeStart"`
	RedisSlotRangeEnd   *int    `json:"redisSlotRangeEnd"`
	// StreamLength is Length; PendingCount is Pending.
	StreamLength int64 `json:"streamLength"`
	PendingCount int64 `json:"pendingCount"`
	// LagKnown is false when Lag is null.
	LagKnown bool `json:"lagKnown"`
	// The ids are null when unknown: the stream is empty, the group was
	// never delivered an entry, or no owner reported progress.
	FirstRecordID           *string `json:"firstRecordId"`
	LastRecordID            *string `json:"lastRecordId"`
	GroupLastDeliveredID    *string `json:"groupLastDeliveredId"`
	ConsumerLastDeliveredID *string `json:"consumerLastDeliveredId"`
	ConsumerLastAckedID     *string `json:"consumerLastAckedId"`
	// ProducedPerSecond is the shard's growth and ConsumedPerSecond its
	// group's catch-up between this read and an earlier one; null until
	// two reads a second apart (ConsumedPerSecond also while the lag is
	// unknown).
	ProducedPerSecond *float64 `json:"producedPerSecond"`
	ConsumedPerSecond *float64 `json:"consumedPerSecond"`
	// MemoryUsageBytes is the key's MEMORY USAGE as the background
	// metrics collection last sampled it; null (MemoryUsageKnown false)
	// until it did.
	MemoryUsageBytes *int64 `json:"memoryUsageBytes"`
	MemoryUsageKnown bool   `json:"memoryUsageKnown"`
	// TargetOwnerMemberIDs and CurrentOwnerMemberIDs are the members
	// targeted and reporting, sorted and comma-separated;
	// OwnerMemberIDs is CurrentOwnerMemberIDs.
	TargetOwnerMemberIDs  string `json:"targetOwnerMemberIds"`
	CurrentOwnerMemberIDs string `json:"currentOwnerMemberIds"`
	OwnerMemberIDs        string `json:"ownerMemberIds"`
	// OwnerState is UNASSIGNED (no owner, none targeted), PENDING_ACK
	// (targeted, nobody reads yet), CURRENT (read by its target) or
	// TRANSITIONING.
	OwnerState string `json:"ownerState"`
}

func (s *server) grafanaShards(c *gin.Context) {
	groups, ok := s.groupsFor(c)
	if !ok {
		return
	}
	rows := []GrafanaShardRow{}
	for _, g := range groups {
		v, err := s.readShardView(c.Request.Context(), g)
		if vanished(err) {
			continue // deleted since the list: leave it out, as the other tables do
		}
		if err != nil {
			s.writeError(c, err) // Redis not configured or down: say so rather than show nothing
			return
		}
		for i, st := range v.shards.Shards {
			o, rate := v.offsets[i], v.rates[st.ShardIndex]
			current, target := strings.Join(st.Owners, ","), strings.Join(v.targets[st.ShardIndex], ",")
			rows = append(rows, GrafanaShardRow{
				StreamPrefix: g.StreamPrefix, ConsumerGroup: g.ConsumerGroup, Shard: st.ShardIndex,
				StreamKey: st.StreamKey, RedisSlot: st.RedisSlot, Draining: st.Draining, Length: st.Length,
				Pending: st.Pending, Lag: st.Lag, LastGeneratedID: st.LastGeneratedID, Owners: current,
				ShardCount: v.shards.ShardCount, ShardIndex: st.ShardIndex, ShardLabel: ":" + strconv.Itoa(st.ShardIndex),
				StreamLength: st.Length, PendingCount: st.Pending, LagKnown: st.Lag != nil,
				FirstRecordID: o.FirstRecordID, LastRecordID: o.LastRecordID, GroupLastDeliveredID: o.GroupLastDeliveredID,
				ConsumerLastDeliveredID: o.ConsumerLastDeliveredID, ConsumerLastAckedID: o.ConsumerLastAckedID,
				ProducedPerSecond: rate.produced, ConsumedPerSecond: rate.consumed,
				MemoryUsageBytes: st.MemoryUsageBytes, MemoryUsageKnown: st.MemoryUsageBytes != nil,
				TargetOwnerMemberIDs: target, CurrentOwnerMemberIDs: current, OwnerMemberIDs: current,
				OwnerState: ownerState(current, target),
			})
		}
	}
	c.JSON(http.StatusOK, rows)
}

// ownerState names how the members reading a shard (current) stand to
// those targeted (target), both sorted and joined.
func ownerState(current, target string) string {
	switch {
	case current == "" && target == "":
		return "UNASSIGNED"
	case current == "":
		return "PENDING_ACK"
	case current == target:
		return "CURRENT"
	}
	return "TRANSITIONING"
}

// vanished reports whether err says the stream or group is gone: deleted
// between the list of groups and the read of one of them.
func vanished(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && (pe.Code == protocol.CodeStreamNotFound || pe.Code == protocol.CodeGroupNotFound)
}
