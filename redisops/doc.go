// Package redisops is the go-redis implementation of
// [actors.StreamRedis]: the few Redis commands the coordinator itself
// sends (docs/protocol.md §7) — XGROUP CREATE … MKSTREAM to provision shard
// streams, XINFO STREAM and XINFO GROUPS for drain proofs and monitoring,
// DEL to retire removed shards, PING for health.
//
// It never reads, writes or acknowledges records: that is the members' and
// producers' business. One address is a standalone server; several are
// the seeds of a Redis Cluster.
package redisops
