// Package protocol is the wire contract of rscoord (docs/protocol.md, protocol version 1): the JSON
// shapes of every request and response, statuses and error codes, protocol
// versions, timing defaults, name validation, shard stream keys, the Redis
// Cluster slot function and the unbiased murmur3 producer route.
//
// It imports only the standard library so that server, member runtime and
// producer share one definition and never drift. Field names are fixed by the
// reference clients (a JVM starter and a Python client): fields may be added,
// never renamed.
//
// Invariant: every slice in a response type marshals as [] and never as null
// (the JVM client's types are non-null and the Python client crashes on null).
// Constructors such as [Shards], [EmptyAssignment] and [NewProducerRouting]
// and the server fill empty slices.
package protocol
