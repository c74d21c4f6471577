// Package gateway is the HTTP face of the coordinator (PROTOCOL.md §3–6):
// gin routes under /coord/v1, JSON decoding and validation at the boundary,
// and §3 error bodies for every failure — malformed JSON, wrong content type,
// oversize bodies, unknown routes and methods, panics.
//
// Handlers hold no coordinator state: each decodes its request, calls one
// method of the *actors.Coordinator (which messages the owning actor) and
// writes the answer. The heartbeat handler answers 200 with a status for
// everything but unparseable JSON, because a non-2xx stops the reference
// Python client's member thread.
//
// Not here yet: authentication, roles, rate limits, audit, metrics, the
// console and the Redis-backed monitoring endpoints (later issues).
package gateway
