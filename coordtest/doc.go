// Package coordtest runs a real coordinator for tests: a Pebble store in a
// directory, the actor system and the gateway behind an httptest server,
// plus simulated members that apply heartbeat responses exactly as
// the status table of docs/protocol.md §6 says a member must.
package coordtest
