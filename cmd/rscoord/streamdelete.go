package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// StreamDeleteCmd is "rscoord stream delete".
type StreamDeleteCmd struct {
	Prefix      string `arg:"" help:"Stream prefix."`
	Force       bool   `help:"Delete the stream's consumer groups first (as group delete --force does) and drop an active migration with it."`
	DeleteKeys  bool   `help:"Also delete every shard key of the stream from Redis (the server needs --redis)."`
	Reason      string `placeholder:"TEXT" help:"Why, for the audit log."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// Run deletes the stream: DELETE /streams/{p}, and prints what went.
func (c *StreamDeleteCmd) Run(ctx context.Context, a *Admin) error {
	if err := protocol.ValidateStreamPrefix(c.Prefix); err != nil {
		return fmt.Errorf("stream delete: %w", err)
	}
	req := protocol.DeleteStreamRequest{RequestedBy: c.RequestedBy, Reason: c.Reason, Force: c.Force, DeleteKeys: c.DeleteKeys}
	var resp protocol.DeleteStreamResponse
	raw, err := a.Client.Do(ctx, http.MethodDelete, coordclient.StreamPath(c.Prefix), req, &resp)
	if err != nil {
		return fmt.Errorf("stream delete %s: %w", c.Prefix, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	if err := printLine(a.Out, "Deleted stream %s (%d shards).\n", resp.StreamPrefix, resp.ShardCount); err != nil {
		return err
	}
	if len(resp.DeletedGroups) > 0 {
		if err := printLine(a.Out, "Deleted consumer groups: %s\n", strings.Join(resp.DeletedGroups, ", ")); err != nil {
			return err
		}
	}
	if resp.DroppedMigration != "" {
		if err := printLine(a.Out, "Dropped migration: %s\n", resp.DroppedMigration); err != nil {
			return err
		}
	}
	if len(resp.DeletedKeys) > 0 {
		return printLine(a.Out, "Deleted shard keys: %s\n", strings.Join(resp.DeletedKeys, ", "))
	}
	return printLine(a.Out, "Shard keys left in Redis (use --delete-keys to remove them).\n")
}
