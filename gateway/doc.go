// Package gateway is the HTTP face of the coordinator (docs/protocol.md §3–6):
// gin routes under /coord/v1, JSON decoding and validation at the boundary,
// §3 error bodies for every failure — malformed JSON, wrong content type,
// oversize bodies, unknown routes and methods, panics — and the security
// and operations layer around them: authentication and roles (package
// auth), login, admin rate limits, the audit log, Prometheus metrics
// (package metrics) and the OpenAPI document.
//
// Every route is one row of routes.go: method, path, the permission it
// needs and, for admin mutations, the audited operation. A request runs,
// in order:
//
//  1. recovery, request id (X-Request-Id, echoed), access log (no headers,
//     no bodies: credentials never reach the log);
//  2. for admin mutations: the audit wrapper, which holds the answer back
//     until the audit entry is durable;
//  3. authentication (Basic or Bearer, any case) and the role check: 401
//     with WWW-Authenticate: Basic realm="rscoord", or 403;
//  4. for admin mutations: the fixed-window rate limit per principal and
//     group, within a budget of groups per principal per window, so that
//     one principal can lock no other out (429 with Retry-After);
//  5. the handler, which decodes its request, calls one method of the
//     Backend (in the server, the coordinator, which messages the owning
//     actor) and answers.
//
// The heartbeat handler answers 200 with a status for every body it can
// read as JSON, because a non-2xx stops the reference Python client's
// member thread. It answers otherwise only for a body that is not JSON
// (400), one over the heartbeat limit (413), one over 64 KiB that finds no
// room in the large-body budget (429), and, with member auth on, missing or
// bad credentials (401), a missing role or member id (403) and Basic
// credentials from an address past its failed-password limit (429).
// Heartbeats need MEMBER on their stream (as a member id the caller is
// bound to) unless the server runs without member auth, when the heartbeat
// path never looks at Authorization.
//
// Invariants: no package-level mutable state (limiters, metrics and the
// authenticator belong to one server); client addresses come from the
// connection, or from X-Forwarded-For and X-Real-IP only when the peer is
// one of Options.TrustedProxies; a client never sees an admin change that
// the audit log lacks, unless the audit write itself failed (logged at
// ERROR and counted).
package gateway
