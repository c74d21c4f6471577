package refimport

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
)

// writeLikeReference stores a group as the reference's Redis store does:
// the hash of its current layout (aggregate, revision, schemaVersion,
// layoutVersion, updatedAt) or the legacy string, and the key in the
// groups index.
func writeLikeReference(t *testing.T, rdb *redis.Client, prefix, stream, group, aggregate string, legacy bool) {
	t.Helper()
	ctx := context.Background()
	tag := "{" + stream + ":" + group + "}"
	key := prefix + ":" + tag + ":metadata"
	if legacy {
		key = prefix + ":" + tag + ":group"
		if err := rdb.Set(ctx, key, aggregate, 0).Err(); err != nil {
			t.Fatal(err)
		}
	} else if err := rdb.HSet(ctx, key, "aggregate", aggregate, "revision", "3", "schemaVersion", "1",
		"layoutVersion", "1", "updatedAt", "2026-12-01T10:00:00Z").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SAdd(ctx, prefix+":groups", key).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestReadReferenceState(t *testing.T) {
	rs := redistest.Standalone(t)
	rdb := rs.Client()
	ctx := context.Background()
	// As Jackson writes GroupMetadata, members and assignments included.
	writeLikeReference(t, rdb, DefaultKeyPrefix, "orders", "billing", `{"streamPrefix":"orders","consumerGroup":"billing","schemaVersion":1,"storeRevision":3,`+
		`"groupEpoch":12,"metadataVersion":41,"assignmentEpoch":12,"state":"STABLE","shardCount":8,`+
		`"members":{"pod-0":{"memberId":"pod-0","memberName":"pod","state":"ACTIVE","memberEpoch":12,"metadataVersion":41,`+
		`"runtimeMaxConcurrency":1,"activeConsumerWorkers":0,"currentAssignment":[{"shardIndex":0}],"revoking":[],`+
		`"lastHeartbeatAt":"2026-12-01T10:00:00Z"},"pod-1":{"memberId":"pod-1","memberName":"pod","state":"EXPIRED","memberEpoch":13,`+
		`"metadataVersion":40,"runtimeMaxConcurrency":1,"activeConsumerWorkers":0,"currentAssignment":[],"revoking":[],`+
		`"lastHeartbeatAt":"2026-12-01T09:00:00Z"}},"targetAssignments":{"pod-0":[{"shardIndex":0}]},`+
		`"migrations":{"m-1":{"reshardingId":"m-1","fromShardCount":4,"toShardCount":8,"state":"ACTIVE",`+
		`"createdAt":"2026-12-01T09:00:00Z","updatedAt":"2026-12-01T09:30:00Z"}},"activeReshardingId":"m-1",`+
		`"metadataCorrection":null,"createdAt":"2026-11-01T00:00:00Z","updatedAt":"2026-12-01T10:00:00Z"}`, false)
	// A legacy record: shard counts by version, a migration id under its
	// old name.
	writeLikeReference(t, rdb, DefaultKeyPrefix, "pay", "pay", `{"streamPrefix":"pay","consumerGroup":"pay","schemaVersion":1,`+
		`"groupEpoch":3,"metadataVersion":5,"assignmentEpoch":3,"state":"EMPTY","activeWriteVersion":"v2",`+
		`"metadataCorrection":{"targetMetadataVersion":5,"observedMetadataVersion":9,"requestedAt":"2026-01-01T00:00:00Z",`+
		`"updatedAt":"2026-01-01T00:00:00Z","acknowledgedMembers":[]},`+
		`"shardCountsByVersion":{"v1":2,"v2":6},"migrations":{"old":{"migrationId":"old","fromVersion":"v1","toVersion":"v2",`+
		`"state":"DEPRECATED","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}},`+
		`"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}`, true)
	// Another coordinator's keys under another prefix are not read, and an
	// indexed key that is gone is skipped.
	writeLikeReference(t, rdb, "other", "x", "x", `{"streamPrefix":"x","consumerGroup":"x","schemaVersion":1,"shardCount":1}`, false)
	if err := rdb.SAdd(ctx, DefaultKeyPrefix+":groups", DefaultKeyPrefix+":{gone:gone}:metadata").Err(); err != nil {
		t.Fatal(err)
	}

	groups, err := Read(ctx, rdb, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 {
		t.Fatalf("read %+v, want 2 groups", groups)
	}
	b, p := groups[0], groups[1]
	if b.StreamPrefix != "orders" || b.ConsumerGroup != "billing" || b.ShardCount != 8 || b.MetadataVersion != 41 || b.GroupEpoch != 12 ||
		len(b.Migrations) != 1 || b.Migrations[0] != (Migration{ID: "m-1", FromShardCount: 4, ToShardCount: 8, State: "ACTIVE"}) {
		t.Fatalf("orders/billing: %+v", b)
	}
	// An expired member's epoch runs ahead of the group's; the floor
	// covers every number a member may carry.
	if b.MemberEpoch != 13 || b.MemberMetadataVersion != 41 || b.Highest() != 41 {
		t.Fatalf("orders/billing's members: epoch %d, version %d, highest %d; want 13, 41, 41", b.MemberEpoch, b.MemberMetadataVersion, b.Highest())
	}
	if p.CorrectionVersion != 9 || p.Highest() != 9 {
		t.Fatalf("pay/pay's correction round: %d, highest %d; want 9, 9", p.CorrectionVersion, p.Highest())
	}
	if p.StreamPrefix != "pay" || p.ShardCount != 6 || len(p.Migrations) != 1 ||
		p.Migrations[0] != (Migration{ID: "old", FromShardCount: 2, ToShardCount: 6, State: "DEPRECATED"}) ||
		!strings.HasSuffix(p.Key, ":group") {
		t.Fatalf("pay/pay (legacy): %+v", p)
	}
	// A record that does not decode fails the read, naming its key.
	writeLikeReference(t, rdb, DefaultKeyPrefix, "bad", "bad", `{"streamPrefix":`, false)
	if _, err := Read(ctx, rdb, DefaultKeyPrefix); err == nil || !strings.Contains(err.Error(), "{bad:bad}") {
		t.Fatalf("a damaged record: %v", err)
	}
}
