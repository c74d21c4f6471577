package bench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
)

// CreateStream creates prefix with shards shards on the coordinator c talks
// to (and with it the default group named like the prefix).
func CreateStream(ctx context.Context, c *coordclient.Client, prefix string, shards int) error {
	_, err := c.Do(ctx, http.MethodPost, coordclient.StreamPath(prefix),
		protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: "bench"}, nil)
	if err != nil {
		return fmt.Errorf("create stream %s: %w", prefix, err)
	}
	return nil
}

// NewClient is a wire-layer client of the coordinator at server with
// creds, as the bench's own calls use.
func NewClient(server string, creds coordclient.Credentials) (*coordclient.Client, error) {
	return newClient(server, creds, 4)
}

// memberAuth is the member option sending creds (none when empty).
func memberAuth(creds coordclient.Credentials) member.Opt {
	switch {
	case creds.Token != "":
		return member.WithBearerToken(creds.Token)
	case creds.User != "":
		return member.WithBasicAuth(creds.User, creds.Password)
	}
	return nil
}

// producerAuth is the producer option sending creds (none when empty).
func producerAuth(creds coordclient.Credentials) producer.Opt {
	switch {
	case creds.Token != "":
		return producer.WithBearerToken(creds.Token)
	case creds.User != "":
		return producer.WithBasicAuth(creds.User, creds.Password)
	}
	return nil
}
