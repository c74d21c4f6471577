// Package bench is rscoord's load harness. Every figure it reports comes
// with a baseline measured in the same run on the same machine, and is
// read as a ratio to it: these machines are shared and noisy, so one timed
// run on its own proves nothing.
//
// The harness talks to a coordinator over HTTP only, like a real member
// would; cmd/rscoord-bench starts the coordinator (or targets one with
// --server).
package bench
