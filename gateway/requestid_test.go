package gateway

import "testing"

// Ids made for requests that bring none are sane tokens, never repeated
// by one server, and differ between servers (restarts).
func TestMadeRequestIDsAreSaneAndUnique(t *testing.T) {
	ids := newRequestIDs()
	seen := map[string]bool{}
	for range 1000 {
		id := ids.next()
		if !saneRequestID(id) {
			t.Fatalf("made id %q is not a sane token", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
	}
	if other := newRequestIDs().next(); seen[other] {
		t.Fatalf("a second server made %q again", other)
	}
}
