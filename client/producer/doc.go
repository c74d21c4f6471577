// Package producer publishes records to a sharded Redis stream: it caches the
// coordinator's producer routing for one {streamPrefix, consumerGroup},
// routes each record by its partition key with protocol.Route, and writes it
// with XADD key NOMKSTREAM [MAXLEN ~ N] * field value … (docs/protocol.md §2, §8).
//
// What it owns: the routing cache, one background goroutine that refreshes it
// (every WithRefreshInterval, and at once when ObserveMetadataVersion reports
// a newer metadataVersion), and, unless WithHTTPClient is given, its HTTP
// client. It does not own the Redis client: the caller creates it (standalone
// or cluster, any redis.UniversalClient) and closes it after Close.
//
// Caller duties, in order:
//  1. New with WithCoordinator, WithStream and WithRedis (and any other Opt);
//     New checks every option and reports all problems at once.
//  2. Start: fetches the routing once; an unknown stream or group, or a
//     stream without shards, is an error here, before anything is published.
//  3. Publish or PublishBatch from any number of goroutines.
//  4. Close: stops the refresher (bounded wait); then close the Redis client.
//
// Invariants:
//   - A record is only ever written with NOMKSTREAM: a producer never creates
//     a shard stream, so a record can never land in a shard that was retired.
//     A missing key means the routing is stale: the producer refreshes it
//     synchronously and retries, up to WithMaxAttempts attempts in all.
//   - Routing not refreshed successfully for longer than WithRoutingLease, or
//     the coordinator's routingLeaseMs when that is shorter, is not used:
//     Publish refreshes it first, and when that fails, fails closed with
//     ErrRoutingLeaseExpired and writes nothing.
//   - A refresh never replaces routing with an older metadataVersion.
//
// Non-goals: exactly-once publishing (an XADD is sent once, never again by
// go-redis after its answer was lost: that record's error matches
// ErrPossiblyWritten, and publishing it again may write it twice;
// consumers are at-least-once anyway), record ordering across partition
// keys, and creating streams or consumer groups.
// Coordinator authentication is supported: WithBasicAuth or
// WithBearerToken.
package producer
