// Package clientit holds the tests of the client module (client/member,
// client/producer) that run against the real coordinator: the coordinator is
// server code, and the client module must not require the server module, not
// even for its tests, so these tests live in the server module and import the
// client module through its replace directive.
package clientit
