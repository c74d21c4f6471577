package bench

import (
	"context"
	"testing"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestRunConsumerComparesWithRawLoop: one warm-up and one measured round
// compare each subject (Handler, BatchHandler, the tally service) with the
// raw loop run beside it; every phase drained all its records (the watch
// ends only then) and left no key behind.
func TestRunConsumerComparesWithRawLoop(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Standalone(t)
	client := rs.Client()
	s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true})
	const records = 200
	cmps, err := RunConsumer(ctx, ConsumerConfig{
		Coordinator: s.URL, Redis: client, Shards: 4, Records: records, Workers: 2, Batch: 16, Rounds: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cmps) != 3 {
		t.Fatalf("%d comparisons, want 3 (Handler, BatchHandler, service)", len(cmps))
	}
	for _, cmp := range cmps {
		// Per measured round: four phases of the subject, and four raw
		// phases beside each of the three subjects.
		if cmp.Subject.Records != 4*records || cmp.Baseline.Records != 12*records || cmp.Target <= 0 {
			t.Fatalf("comparison = %+v", cmp)
		}
		if len(cmp.RoundRatios) != 1 || cmp.MedianRatio <= 0 || cmp.BestRatio <= 0 || cmp.MinRatio != cmp.MaxRatio {
			t.Fatalf("round ratios of %+v, want one from the measured round", cmp)
		}
		if cmp.SubjectCPU.Process <= 0 || cmp.BaselineCPU.Process <= 0 {
			t.Fatalf("CPU per record of %+v, want both measured", cmp)
		}
	}
	keys, err := client.Keys(ctx, "bench-*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left behind: %v, %v", keys, err)
	}
}
