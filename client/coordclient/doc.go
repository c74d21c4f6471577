// Package coordclient is the one wire layer of every Go client of the
// coordinator's HTTP API (docs/protocol.md §3–§6): the member runtime, the
// producer, the admin CLI, the bench and the test helpers all build their
// URLs, send their credentials and decode error bodies here.
//
// What it owns:
//
//   - base URLs: "host:port" or an http(s) URL, optionally ending with the
//     API base path; several URLs for a coordinator cluster (the rules
//     below);
//   - the path of every endpoint ([HeartbeatPath], [ProducerRoutingPath],
//     …), each name segment escaped;
//   - the Authorization header (Basic or Bearer, [BasicAuth], [BearerAuth]);
//   - decoding every non-2xx answer into one typed [Error] (HTTP status,
//     §3 body, Retry-After as a duration);
//   - the calls every client needs: [Client.Do] for JSON, and the typed
//     [Client.Heartbeat], [Client.ProducerRouting] and [Client.Login].
//
// # Several URLs
//
// The URLs of a cluster are its replicas. Calls start at the current URL:
// the last one that answered, or the one its answer named in the owner
// hint (X-Rscoord-Owner-Url, docs/protocol.md §5.6) when that is one of the
// client's URLs. A replica that cannot serve a call moves the next call to
// the next URL: one that refused the connection, did not answer before
// the call's deadline, broke the connection, answered 502, 503 or 504, or
// answered a heartbeat RETRY whose errorCode says another replica may
// serve it ([protocol.ErrorCode.ServedElsewhere]: REPLICA_NOT_OWNER,
// REPLICA_LEASE_UNCERTAIN, REPLICA_JOINING, COORDINATOR_TERMINATING,
// STORE_UNAVAILABLE). A RETRY without such a code (MEMBER_ID_IN_USE, a
// group the coordinator cannot decide for now) is the coordinator's
// answer, and the client stays. A caller that cancels its call says
// nothing about the replica.
//
// Such a URL is marked down: calls try it after the others, and an owner
// hint naming it is not followed, until it answers again (when the others
// failed) or ten seconds passed, after which the hint counts again.
//
// Within one call, a request that never left (no connection) goes to the
// next URL, whatever its method. A read (GET, HEAD) and a login also go on
// after the other failures above: carried out twice, they change nothing.
// An admin mutation never does: once it may have been sent, its error is
// returned and only the next call moves on, so a create, scale or delete
// is never carried out twice behind the caller's back.
//
// Heartbeats are hedged ([Client.Heartbeat]): one not answered within
// its waitMs plus min(1 s, member lease / 6) is sent, same requestId and
// requestSeq, to the next URL as well, and the first answer that is not
// RETRY wins.
//
// It must not import anything but protocol/ and the standard library: the
// client libraries (member/, producer/) that depend on it are meant to live
// in a module of their own, free of the server's dependencies.
//
// A [Client] is safe for concurrent use.
package coordclient
