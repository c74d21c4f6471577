package bench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rscoord/rscoord/protocol"
)

// CreateStream creates prefix with shards shards on the coordinator at
// server (and with it the default group named like the prefix).
func CreateStream(ctx context.Context, hc *http.Client, server, prefix string, shards int) error {
	err := postJSON(ctx, hc, server+protocol.BasePath+"/streams/"+prefix,
		protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: "bench"}, nil)
	if err != nil {
		return fmt.Errorf("create stream %s: %w", prefix, err)
	}
	return nil
}
