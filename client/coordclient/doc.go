// Package coordclient is the one wire layer of every Go client of the
// coordinator's HTTP API (docs/protocol.md §3–§6): the member runtime, the
// producer, the admin CLI, the bench and the test helpers all build their
// URLs, send their credentials and decode error bodies here.
//
// What it owns:
//
//   - base URLs: "host:port" or an http(s) URL, optionally ending with the
//     API base path; several URLs for a coordinator cluster, where a call
//     that cannot connect to one tries the next (and the client keeps
//     using the one that answered);
//   - the path of every endpoint ([HeartbeatPath], [ProducerRoutingPath],
//     …), each name segment escaped;
//   - the Authorization header (Basic or Bearer, [BasicAuth], [BearerAuth]);
//   - decoding every non-2xx answer into one typed [Error] (HTTP status,
//     §3 body, Retry-After as a duration);
//   - the calls every client needs: [Client.Do] for JSON, and the typed
//     [Client.Heartbeat], [Client.ProducerRouting] and [Client.Login].
//
// It must not import anything but protocol/ and the standard library: the
// client libraries (member/, producer/) that depend on it are meant to live
// in a module of their own, free of the server's dependencies.
//
// A [Client] is safe for concurrent use.
package coordclient
