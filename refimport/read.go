package refimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyPrefix is the reference store's default key prefix
// (coordinator.store.key-prefix).
const DefaultKeyPrefix = "redis-stream:coord"

// aggregateField is the hash field holding a group's JSON.
const aggregateField = "aggregate"

// Group is what the import needs of one reference group.
type Group struct {
	StreamPrefix    string
	ConsumerGroup   string
	SchemaVersion   int
	GroupEpoch      int64
	MetadataVersion int64
	AssignmentEpoch int64
	// MemberEpoch and MemberMetadataVersion are the highest epoch and
	// version any member record holds (a member's may run ahead of the
	// group's: an expiry raises the member's epoch first, a metadata
	// correction records the version a member reported).
	MemberEpoch           int64
	MemberMetadataVersion int64
	// CorrectionVersion is the highest version of the group's metadata
	// correction round, when one is open: what members reported.
	CorrectionVersion int64
	// ShardCount is the group's shard count; 0 when the record holds
	// none (a legacy record whose count could not be derived).
	ShardCount int
	// Migrations are the group's reshardings, by id.
	Migrations []Migration
	// Key is the Redis key the group was read from.
	Key string
}

// Migration is one resharding of a reference group.
type Migration struct {
	ID             string
	FromShardCount int
	ToShardCount   int
	State          string
}

// groupJSON is the subset of the reference's GroupMetadata JSON read
// here, legacy fields included (shardCountsByVersion, activeWriteVersion
// and the migrations' fromVersion/toVersion, from before it stored shard
// counts).
type groupJSON struct {
	StreamPrefix         string                   `json:"streamPrefix"`
	ConsumerGroup        string                   `json:"consumerGroup"`
	SchemaVersion        int                      `json:"schemaVersion"`
	GroupEpoch           int64                    `json:"groupEpoch"`
	MetadataVersion      int64                    `json:"metadataVersion"`
	AssignmentEpoch      int64                    `json:"assignmentEpoch"`
	ShardCount           *int                     `json:"shardCount"`
	Migrations           map[string]migrationJSON `json:"migrations"`
	ShardCountsByVersion map[string]int           `json:"shardCountsByVersion"`
	ActiveWriteVersion   string                   `json:"activeWriteVersion"`
	Members              map[string]memberJSON    `json:"members"`
	MetadataCorrection   *correctionJSON          `json:"metadataCorrection"`
}

type memberJSON struct {
	MemberEpoch     int64 `json:"memberEpoch"`
	MetadataVersion int64 `json:"metadataVersion"`
}

type correctionJSON struct {
	TargetMetadataVersion   int64 `json:"targetMetadataVersion"`
	ObservedMetadataVersion int64 `json:"observedMetadataVersion"`
}

type migrationJSON struct {
	ReshardingID   string `json:"reshardingId"`
	MigrationID    string `json:"migrationId"`
	FromShardCount *int   `json:"fromShardCount"`
	ToShardCount   *int   `json:"toShardCount"`
	FromVersion    string `json:"fromVersion"`
	ToVersion      string `json:"toVersion"`
	State          string `json:"state"`
}

// Read returns every group indexed under keyPrefix, sorted by stream and
// group. A group whose key is gone is skipped; one that does not decode
// fails the read, naming its key: an import must not silently leave a
// group out.
func Read(ctx context.Context, rdb redis.UniversalClient, keyPrefix string) ([]Group, error) {
	if keyPrefix == "" {
		keyPrefix = DefaultKeyPrefix
	}
	index := keyPrefix + ":groups"
	keys, err := rdb.SMembers(ctx, index).Result()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", index, err)
	}
	sort.Strings(keys)
	var out []Group
	seen := map[[2]string]bool{}
	for _, key := range keys {
		raw, err := readGroupValue(ctx, rdb, key)
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		g, err := decodeGroup(raw)
		if err != nil {
			return nil, fmt.Errorf("group at %s: %w", key, err)
		}
		g.Key = key
		if id := [2]string{g.StreamPrefix, g.ConsumerGroup}; !seen[id] {
			seen[id] = true
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].StreamPrefix != out[j].StreamPrefix {
			return out[i].StreamPrefix < out[j].StreamPrefix
		}
		return out[i].ConsumerGroup < out[j].ConsumerGroup
	})
	return out, nil
}

// readGroupValue reads the JSON at key: the hash field of the current
// layout, else the string of the legacy one; redis.Nil when neither.
func readGroupValue(ctx context.Context, rdb redis.UniversalClient, key string) (string, error) {
	typ, err := rdb.Type(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	switch typ {
	case "hash":
		v, err := rdb.HGet(ctx, key, aggregateField).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("read %s: %w", key, err)
		}
		return v, err
	case "string":
		v, err := rdb.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("read %s: %w", key, err)
		}
		return v, err
	case "none":
		return "", redis.Nil
	}
	return "", fmt.Errorf("read %s: a %s, not a group record", key, typ)
}

// decodeGroup decodes a group's JSON, deriving the shard counts of legacy
// records as the reference's store does when it reads them.
func decodeGroup(raw string) (Group, error) {
	var j groupJSON
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return Group{}, fmt.Errorf("not a group record: %w", err)
	}
	if j.StreamPrefix == "" || j.ConsumerGroup == "" {
		return Group{}, errors.New("no streamPrefix or consumerGroup")
	}
	g := Group{StreamPrefix: j.StreamPrefix, ConsumerGroup: j.ConsumerGroup, SchemaVersion: j.SchemaVersion,
		GroupEpoch: j.GroupEpoch, MetadataVersion: j.MetadataVersion, AssignmentEpoch: j.AssignmentEpoch}
	for _, m := range j.Members {
		g.MemberEpoch = max(g.MemberEpoch, m.MemberEpoch)
		g.MemberMetadataVersion = max(g.MemberMetadataVersion, m.MetadataVersion)
	}
	if c := j.MetadataCorrection; c != nil {
		g.CorrectionVersion = max(c.TargetMetadataVersion, c.ObservedMetadataVersion)
	}
	switch {
	case j.ShardCount != nil:
		g.ShardCount = *j.ShardCount
	case j.ShardCountsByVersion[j.ActiveWriteVersion] > 0:
		g.ShardCount = j.ShardCountsByVersion[j.ActiveWriteVersion]
	default:
		for _, n := range j.ShardCountsByVersion {
			g.ShardCount = max(g.ShardCount, n)
		}
	}
	for key, m := range j.Migrations {
		id := m.ReshardingID
		if id == "" {
			id = m.MigrationID
		}
		if id == "" {
			id = key
		}
		mig := Migration{ID: id, State: strings.ToUpper(m.State),
			FromShardCount: legacyCount(m.FromShardCount, j.ShardCountsByVersion[m.FromVersion], g.ShardCount),
			ToShardCount:   legacyCount(m.ToShardCount, j.ShardCountsByVersion[m.ToVersion], g.ShardCount)}
		g.Migrations = append(g.Migrations, mig)
	}
	sort.Slice(g.Migrations, func(a, b int) bool { return g.Migrations[a].ID < g.Migrations[b].ID })
	return g, nil
}

// Highest is the highest epoch or version the reference may have answered
// for the group, or that one of its members may carry: the floor above
// which rscoord starts the group (see the runbook in docs/operations.md).
func (g Group) Highest() int64 {
	return max(g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion, g.MemberEpoch, g.MemberMetadataVersion, g.CorrectionVersion, 0)
}

func legacyCount(count *int, byVersion, fallback int) int {
	switch {
	case count != nil:
		return *count
	case byVersion > 0:
		return byVersion
	}
	return fallback
}
