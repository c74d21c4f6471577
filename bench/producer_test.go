package bench

import (
	"context"
	"testing"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

func TestRunProducerComparesWithRawXAdd(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Standalone(t)
	client := rs.Client()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("dp", 4)
	if err := redistest.CreateShards(ctx, client, "dp", 4, "dp"); err != nil {
		t.Fatal(err)
	}
	cmp, err := RunProducer(ctx, DataplaneConfig{
		Coordinator: s.URL, Redis: client, Stream: "dp", Shards: 4, Records: 500, Batch: 50, Conns: 2, Rounds: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Subject.Records != 1000 || cmp.Baseline.Records != 1000 || cmp.Ratio <= 0 {
		t.Fatalf("comparison = %+v", cmp)
	}
	var total int64
	for i := range 4 {
		n, err := client.XLen(ctx, "dp:"+string(rune('0'+i))).Result()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 2000 {
		t.Fatalf("streams hold %d records, want 2000 (both phases)", total)
	}
}
