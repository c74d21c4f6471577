package persistence

import (
	"context"
	"testing"
	"time"
)

func TestPruneAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		retention AuditRetention
		// keep is how many of the 100 newest entries survive.
		keep int
	}{
		{"nothing bounded", AuditRetention{}, 100},
		{"by age", AuditRetention{MaxAge: 30 * time.Second}, 30},
		{"by size", AuditRetention{MaxBytes: 10_000}, -1},
		{"both", AuditRetention{MaxAge: 80 * time.Second, MaxBytes: 1_000_000}, 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenPebble(t.TempDir(), Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range 100 {
				mustAppend(t, s, auditEntry(i, "orders"))
			}
			// Entry i is at t0+i s; "now" is just after the newest.
			now := t0.Add(100 * time.Second)
			deleted, err := s.PruneAudit(ctx, tc.retention, now)
			if err != nil {
				t.Fatal(err)
			}
			left, err := s.ListAudit(ctx, AuditQuery{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if deleted+len(left) != 100 {
				t.Fatalf("deleted %d, left %d", deleted, len(left))
			}
			if tc.keep >= 0 && len(left) != tc.keep {
				t.Fatalf("kept %d entries, want %d", len(left), tc.keep)
			}
			if tc.retention.MaxBytes > 0 {
				var size int64
				for _, r := range left {
					raw, _ := encodeAudit(r.Entry)
					size += int64(len(raw))
				}
				if size > tc.retention.MaxBytes || len(left) == 0 || len(left) == 100 {
					t.Fatalf("%d entries of %d bytes left under a %d-byte bound", len(left), size, tc.retention.MaxBytes)
				}
			}
			// What is left is the newest entries, without a gap.
			for i, r := range left {
				if r.Err != nil || r.Entry.Reason != auditEntry(99-i, "orders").Reason {
					t.Fatalf("entry %d left is %+v", i, r)
				}
			}
			// A second run finds nothing more to do.
			if again, err := s.PruneAudit(ctx, tc.retention, now); err != nil || again != 0 {
				t.Fatalf("second prune: %d, %v", again, err)
			}
		})
	}
}
