// Package redistest starts real redis-server processes for tests: one
// standalone server (Standalone, StartServer) or a 3-master Redis Cluster
// (NewCluster, StartCluster), each on free loopback ports (127.0.0.1 only),
// in its own directory, without persistence (--save "" --appendonly no).
//
// What it owns: the redis-server child processes it starts and the clients
// it hands out through Server.Client and Cluster.Client. Stop kills and
// waits for every process and closes those clients, so a test that stops
// what it started leaves no process and no goroutine behind (goleak-clean).
//
// Caller duties, in order:
//  1. Call Require (Standalone and NewCluster do it) so a machine without
//     redis-server fails with a message saying how to install it.
//  2. Start a server or a cluster; Standalone and NewCluster register Stop in
//     t.Cleanup, StartServer and StartCluster leave Stop to the caller.
//  3. Create the shard streams a test publishes to or reads from with
//     CreateShards: the coordinator in tests has no Redis configured, and
//     producers publish with XADD NOMKSTREAM.
//  4. Stop (or let t.Cleanup stop) everything before the test returns.
//
// StartTLSServer and StandaloneTLS add a TLS port with a throwaway CA
// (NewTLSFiles); WithAnnouncedPorts makes cluster nodes announce addresses
// nobody listens on, as behind NAT (Cluster.NATMap maps them back).
//
// Non-goals: replicas, persistence, ACLs, Sentinel. The redis-server
// binary comes from the OS packages (go tool task redis:install), never from
// this package.
package redistest
