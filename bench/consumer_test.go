package bench

import (
	"context"
	"testing"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

func TestRunConsumerComparesWithRawLoop(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Standalone(t)
	client := rs.Client()
	s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true})
	cmps, err := RunConsumer(ctx, ConsumerConfig{
		Coordinator: s.URL, Redis: client, Shards: 4, Records: 400, Workers: 2, Batch: 16, Rounds: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cmps) != 2 {
		t.Fatalf("%d comparisons, want 2 (Handler, BatchHandler)", len(cmps))
	}
	for _, cmp := range cmps {
		if cmp.Subject.Records != 800 || cmp.Baseline.Records != 800 || cmp.Ratio <= 0 || cmp.Target <= 0 {
			t.Fatalf("comparison = %+v", cmp)
		}
	}
	// Every phase left nothing pending.
	for _, prefix := range []string{"bench-raw-0", "bench-member-0", "bench-batch-0", "bench-raw-1", "bench-member-1", "bench-batch-1"} {
		for i := range 4 {
			key := prefix + ":" + string(rune('0'+i))
			p, err := client.XPending(ctx, key, prefix).Result()
			if err != nil {
				t.Fatal(err)
			}
			if p.Count != 0 {
				t.Fatalf("%s has %d pending records", key, p.Count)
			}
		}
	}
}
