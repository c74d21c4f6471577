// Package etcdtest starts real etcd server processes for tests: a cluster
// of 3 members (NewCluster, StartCluster) on free loopback ports
// (127.0.0.1 only), each in its own data directory, and lets a test kill,
// pause (SIGSTOP), resume and restart single members to make etcd lose a
// member or its quorum.
//
// What it owns: the etcd child processes it starts and the clients it hands
// out through Cluster.Client. Stop closes those clients and stops every
// process, so a test that stops what it started leaves no process and no
// goroutine behind (goleak-clean).
//
// Caller duties, in order:
//  1. Call Require (NewCluster does it) so a machine without etcd fails with
//     a message saying how to install it.
//  2. Start a cluster; NewCluster registers Stop in t.Cleanup, StartCluster
//     leaves Stop to the caller.
//  3. Give the code under test Cluster.Endpoints (every member's client URL):
//     clients that know all members survive the loss of one.
//  4. Stop (or let t.Cleanup stop) the cluster before the test returns.
//
// Data directories live on /dev/shm when it is writable: tests kill
// processes, not machines, so etcd's fsyncs buy nothing there and cost a
// lot on a shared disk.
//
// Non-goals: TLS, authentication, membership changes. The etcd binary comes
// from the OS packages (Debian's etcd-server), never from this package.
package etcdtest
