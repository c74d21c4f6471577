package actors

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// The queue of wait ends yields parked answers earliest first, up to the
// limit, and skips the entries of answers sent or replaced meanwhile.
func TestHeldWaitsYieldDueAnswersEarliestFirst(t *testing.T) {
	base := time.Now()
	parked := map[string]*parkedAnswer{}
	var w heldWaits
	var want []time.Duration
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		id := string(rune('a'+i%26)) + string(rune('a'+i/26))
		off := time.Duration(r.IntN(1000)) * time.Millisecond
		p := &parkedAnswer{req: &protocol.HeartbeatRequest{MemberID: id}, seq: uint64(i + 1), due: base.Add(off)}
		w.add(p)
		if i%5 == 0 {
			continue // answered meanwhile: never yielded
		}
		parked[id] = p
		if off <= 500*time.Millisecond {
			want = append(want, off)
		}
	}
	// A member parked again: its earlier entry is stale.
	old := parked["ba"]
	again := &parkedAnswer{req: old.req, seq: 1000, due: base.Add(2 * time.Second)}
	w.add(again)
	parked["ba"] = again
	if off := old.due.Sub(base); off <= 500*time.Millisecond {
		i := slices.Index(want, off)
		want = slices.Delete(want, i, i+1)
	}
	slices.Sort(want)
	var got []time.Duration
	for p := range w.due(base.Add(500*time.Millisecond), parked) {
		got = append(got, p.due.Sub(base))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("yielded waits %v, want %v", got, want)
	}
	for _, e := range w.queue {
		if e.at.Sub(base) <= 500*time.Millisecond {
			t.Fatalf("an entry due at %v stayed queued", e.at.Sub(base))
		}
	}
}
