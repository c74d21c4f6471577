package redisops

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestGroupFactsLag: which XINFO GROUPS rows give a known lag. The rows of
// Redis before 7.0 cannot come from this machine's Redis (7.x), so they are
// written here as go-redis reads them: no lag field, read as 0.
func TestGroupFactsLag(t *testing.T) {
	const last = "1700000000000-5" // the stream's last entry id
	tests := []struct {
		name          string
		row           redis.XInfoGroup
		lastGenerated string
		want          int64 // -1: unknown
	}{
		{"caught up, lag 0", redis.XInfoGroup{Name: "g", LastDeliveredID: last, EntriesRead: 6}, last, 0},
		{"behind, lag 3", redis.XInfoGroup{Name: "g", LastDeliveredID: "1700000000000-2", Lag: 3, EntriesRead: 3}, last, 3},
		{"null lag", redis.XInfoGroup{Name: "g", LastDeliveredID: "1700000000000-2", Lag: -1}, last, -1},
		{"empty stream", redis.XInfoGroup{Name: "g", LastDeliveredID: "0-0"}, "0-0", 0},
		{"Redis 6.2, behind: no lag field", redis.XInfoGroup{Name: "g", LastDeliveredID: "1700000000000-2"}, last, -1},
		{"Redis 6.2, never read: no lag field", redis.XInfoGroup{Name: "g", LastDeliveredID: "0-0"}, last, -1},
		{"Redis 6.2, caught up: no lag field", redis.XInfoGroup{Name: "g", LastDeliveredID: last}, last, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := groupFacts(tc.row, tc.lastGenerated)
			got := int64(-1)
			if f.Lag != nil {
				got = *f.Lag
			}
			if got != tc.want {
				t.Fatalf("lag = %d, want %d (-1: unknown)", got, tc.want)
			}
			if f.Name != tc.row.Name || f.Pending != tc.row.Pending || f.LastDeliveredID != tc.row.LastDeliveredID {
				t.Fatalf("facts %+v do not carry the row %+v", f, tc.row)
			}
		})
	}
}
