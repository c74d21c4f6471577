// Package memberit holds the tests of client/member that need the real
// coordinator (coordtest) next to real Redis: joins, hand-offs,
// fencing, lease expiry and recovery. The member tests that need neither stay
// beside the package in the client module.
package memberit
