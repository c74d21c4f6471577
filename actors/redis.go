package actors

import (
	"context"
	"errors"

	"github.com/rscoord/rscoord/client/protocol"
)

// StreamRedis is what the coordinator asks of Redis (docs/protocol.md §7): it
// creates shard streams and consumer groups, reads the facts drain proofs
// are made of, and deletes retired shards. It never reads or acknowledges
// records. Implementations are safe for concurrent use; package redisops
// has the go-redis one. Every method honours ctx.
type StreamRedis interface {
	// Provision makes every key exist with every group on it (XGROUP
	// CREATE key group 0 MKSTREAM). A group that exists already is a
	// success (BUSYGROUP): Provision is idempotent.
	Provision(ctx context.Context, keys, groups []string) error
	// Inspect reads one shard stream: its length and last id (XINFO
	// STREAM) and every consumer group on it (XINFO GROUPS). A missing key
	// is not an error: it answers Exists false.
	Inspect(ctx context.Context, key string) (ShardFacts, error)
	// Range reads at most count entries of key after the entry id after
	// (exclusive; "" means from the start), oldest first, or before it
	// (newest first) when backward is set. A missing key reads as empty.
	// It is for monitoring: nothing is read through a consumer group.
	Range(ctx context.Context, key, after string, count int64, backward bool) ([]Entry, error)
	// Delete deletes keys; missing keys are fine.
	Delete(ctx context.Context, keys ...string) error
	// DestroyGroup removes the consumer group from every key (XGROUP
	// DESTROY), its pending entries with it. Missing keys and keys
	// without the group are fine: it is idempotent.
	DestroyGroup(ctx context.Context, keys []string, group string) error
	// SetGroupID moves the group's last delivered id on key (XGROUP
	// SETID); its pending entries stay as they are.
	SetGroupID(ctx context.Context, key, group, id string) error
	// Ping checks that Redis answers.
	Ping(ctx context.Context) error
}

// ShardFacts is one shard stream as Redis shows it.
type ShardFacts struct {
	Key             string
	Exists          bool
	Length          int64
	LastGeneratedID string
	// FirstEntryID and LastEntryID are the ids of the oldest and newest
	// entries the stream holds now; "" when it holds none.
	FirstEntryID, LastEntryID string
	// EntriesAdded is how many entries the key has had added in its life
	// (XINFO STREAM entries-added; 0 on Redis before 7.0).
	EntriesAdded int64
	Groups       []GroupFacts
}

// Entry is one stream entry read for monitoring.
type Entry struct {
	ID     string
	Fields map[string]any
}

// GroupFacts is one Redis consumer group on a shard stream.
type GroupFacts struct {
	Name            string
	Pending         int64
	LastDeliveredID string
	EntriesRead     int64
	// Lag is nil when Redis cannot tell (XINFO GROUPS answers null, e.g.
	// after deletions on Redis 7.0): unproven, never zero.
	Lag *int64
}

// Group returns the facts of the named group, or nil.
func (f ShardFacts) Group(name string) *GroupFacts {
	for i := range f.Groups {
		if f.Groups[i].Name == name {
			return &f.Groups[i]
		}
	}
	return nil
}

// redisRefusal is the reply of a command Redis refused (an error reply,
// such as WRONGTYPE for a key that holds something other than a stream),
// found in err's chain, and whether there is one. Unlike a Redis that
// does not answer, a refusal is not mended by waiting: an operator must
// mend what Redis holds, so the client is told what it said.
func redisRefusal(err error) (string, bool) {
	// go-redis marks its error replies with this method; the package
	// needs no import of it.
	var reply interface {
		error
		RedisError()
	}
	if !errors.As(err, &reply) {
		return "", false
	}
	const most = 200
	text := reply.Error()
	if len(text) > most {
		text = text[:most] + "…"
	}
	return text, true
}

// provisioningFailed is the client's error for shard streams Redis did not
// create: REDIS_STREAM_PROVISIONING_FAILED, saying the same request again
// resumes it, and what Redis said when it refused.
func provisioningFailed(err error) *protocol.Error {
	if reply, ok := redisRefusal(err); ok {
		return protocol.Errorf(protocol.CodeRedisStreamProvisioningFailed,
			"Redis refused to create a shard stream ("+reply+"): mend the key, then repeat the request")
	}
	return protocol.Errorf(protocol.CodeRedisStreamProvisioningFailed,
		"creating the shard streams in Redis failed; repeat the request once Redis answers")
}
