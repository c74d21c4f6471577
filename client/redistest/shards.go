package redistest

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/rscoord/rscoord/client/protocol"
)

// CreateShards creates the shard streams prefix:0 … prefix:n-1 and the
// consumer group group on each (XGROUP CREATE key group 0 MKSTREAM), as a
// coordinator with Redis configured would. It is idempotent: an existing
// group (BUSYGROUP) is fine. client may be a standalone or cluster client.
func CreateShards(ctx context.Context, client redis.UniversalClient, prefix string, n int, group string) error {
	for i := range n {
		key := protocol.StreamKey(prefix, i)
		err := client.XGroupCreateMkStream(ctx, key, group, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return fmt.Errorf("redistest: create shard %s group %s: %w", key, group, err)
		}
	}
	return nil
}
