package coordclient

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/rscoord/rscoord/client/protocol"
)

// Path joins the API base path and segments, each escaped as one path
// segment: Path("streams", "a/b") is "/coord/v1/streams/a%2Fb".
func Path(segments ...string) string {
	var b strings.Builder
	b.WriteString(protocol.BasePath)
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// LoginPath is POST /auth/login.
func LoginPath() string { return Path("auth", "login") }

// StreamPath is POST /streams/{prefix} (create a stream).
func StreamPath(prefix string) string { return Path("streams", prefix) }

// StreamScalePath is POST /streams/{prefix}/scale.
func StreamScalePath(prefix string) string { return Path("streams", prefix, "scale") }

// GroupPath is /streams/{prefix}/groups/{group}: POST creates, GET reads,
// DELETE deletes.
func GroupPath(prefix, group string) string { return Path("streams", prefix, "groups", group) }

// OffsetsResetPath is POST /streams/{prefix}/groups/{group}/offsets/reset.
func OffsetsResetPath(prefix, group string) string {
	return Path("streams", prefix, "groups", group, "offsets", "reset")
}

// GroupScalePath is the compatibility scale path of a group.
func GroupScalePath(prefix, group string) string {
	return Path("streams", prefix, "groups", group, "scale")
}

// HeartbeatPath is POST …/members/{memberId}/heartbeat.
func HeartbeatPath(prefix, group, memberID string) string {
	return Path("streams", prefix, "groups", group, "members", memberID, "heartbeat")
}

// ProducerRoutingPath is GET …/groups/{group}/producer-routing.
func ProducerRoutingPath(prefix, group string) string {
	return Path("streams", prefix, "groups", group, "producer-routing")
}

// MigrationPath is GET …/groups/{group}/migrations/{reshardingId}.
func MigrationPath(prefix, group, id string) string {
	return Path("streams", prefix, "groups", group, "migrations", id)
}

// RollbackPath is POST …/groups/{group}/migrations/{reshardingId}/rollback.
func RollbackPath(prefix, group, id string) string {
	return Path("streams", prefix, "groups", group, "migrations", id, "rollback")
}

// CompletePath is POST /streams/{prefix}/migrations/{reshardingId}/complete.
func CompletePath(prefix, id string) string {
	return Path("streams", prefix, "migrations", id, "complete")
}

// MonitoringPath is /monitoring/{what…}, e.g. MonitoringPath("health").
func MonitoringPath(what ...string) string { return Path(append([]string{"monitoring"}, what...)...) }

// MonitoringGroupPath is /monitoring/streams/{prefix}/groups/{group}[/{what…}]:
// MonitoringGroupPath("orders", "orders", "assignments").
func MonitoringGroupPath(prefix, group string, what ...string) string {
	return Path(append([]string{"monitoring", "streams", prefix, "groups", group}, what...)...)
}

// ShardMessagesPath is the messages page of one shard.
func ShardMessagesPath(prefix, group string, shard int) string {
	return MonitoringGroupPath(prefix, group, "shards", strconv.Itoa(shard), "messages")
}
