package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// OffsetsResetCmd is "rscoord offsets reset".
type OffsetsResetCmd struct {
	Group       string    `arg:"" help:"Consumer group."`
	Stream      string    `required:"" placeholder:"PREFIX" help:"Stream prefix."`
	ToEarliest  bool      `name:"to-earliest" help:"Before the first entry: everything is read again."`
	ToLatest    bool      `name:"to-latest" help:"The last entry: only entries added later are read."`
	ToTime      time.Time `name:"to-time" placeholder:"RFC3339" help:"The first entry read next is the first added at or after this time (2026-01-02T15:04:05Z)."`
	ToID        string    `name:"to-id" placeholder:"ID" help:"The entries after this entry id (ms-seq) are read next."`
	Shard       []int     `placeholder:"N" help:"Only this shard (repeat for more; default: every readable shard)."`
	Execute     bool      `help:"Apply the reset (default: a dry run that prints what would change). Refused while members read the shards, unless --force."`
	Force       bool      `help:"With --execute: reset under live members, which hand the shards off first and get them back after. Without --execute: a dry run that names them."`
	Reason      string    `placeholder:"TEXT" help:"Why, for the audit log (required with --execute)."`
	RequestedBy string    `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// request builds the API request from the flags, or says what is wrong
// with them.
func (c *OffsetsResetCmd) request() (protocol.OffsetsResetRequest, error) {
	req := protocol.OffsetsResetRequest{RequestedBy: c.RequestedBy, Reason: c.Reason, Shards: c.Shard, Execute: c.Execute, Force: c.Force}
	var picked []string
	if c.ToEarliest {
		picked, req.To = append(picked, "--to-earliest"), protocol.ResetToEarliest
	}
	if c.ToLatest {
		picked, req.To = append(picked, "--to-latest"), protocol.ResetToLatest
	}
	if !c.ToTime.IsZero() {
		picked, req.To, req.Time = append(picked, "--to-time"), protocol.ResetToTime, c.ToTime.UTC().Format(time.RFC3339Nano)
	}
	if c.ToID != "" {
		picked, req.To, req.ID = append(picked, "--to-id"), protocol.ResetToID, c.ToID
	}
	switch {
	case len(picked) == 0:
		return req, errors.New("say where to: --to-earliest, --to-latest, --to-time or --to-id")
	case len(picked) > 1:
		return req, fmt.Errorf("%s: give one of them", strings.Join(picked, " and "))
	case c.Execute && strings.TrimSpace(c.Reason) == "":
		return req, errors.New("--execute needs a --reason, for the audit log")
	}
	for _, s := range c.Shard {
		if s < 0 {
			return req, fmt.Errorf("--shard %d must not be negative", s)
		}
	}
	return req, nil
}

// Run plans or applies the reset: POST
// /streams/{p}/groups/{g}/offsets/reset.
func (c *OffsetsResetCmd) Run(ctx context.Context, a *Admin) error {
	ref := GroupRef{Prefix: c.Stream, Group: c.Group}
	if err := ref.validate("offsets reset"); err != nil {
		return err
	}
	req, err := c.request()
	if err != nil {
		return fmt.Errorf("offsets reset: %w", err)
	}
	var resp protocol.OffsetsResetResponse
	raw, err := a.Client.Do(ctx, http.MethodPost, coordclient.OffsetsResetPath(c.Stream, c.Group), req, &resp)
	if err != nil {
		return fmt.Errorf("offsets reset %s: %w", ref, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	t := newTable(a.Out, "SHARD", "KEY", "LAST DELIVERED", "NEW LAST DELIVERED", "READ BY")
	for _, s := range resp.Shards {
		t.row(formatInt(s.ShardIndex), s.StreamKey, orNone(s.CurrentLastDeliveredID), s.NewLastDeliveredID, joinOrNone(s.Owners))
	}
	if err := t.flush(); err != nil {
		return err
	}
	switch {
	case resp.Executed && len(resp.HandedOff) > 0:
		return printLine(a.Out, "\nReset group %s of stream %s on %d shards; %s handed the shards off first and read them again after.",
			c.Group, c.Stream, len(resp.Shards), strings.Join(resp.HandedOff, ", "))
	case resp.Executed:
		return printLine(a.Out, "\nReset group %s of stream %s on %d shards.", c.Group, c.Stream, len(resp.Shards))
	case c.Force && len(resp.HandedOff) > 0:
		return printLine(a.Out, "\nDry run: nothing changed. With --execute --force --reason TEXT, %s would hand the shards off first, until the reset is done.",
			strings.Join(resp.HandedOff, ", "))
	case c.Force:
		return printLine(a.Out, "\nDry run: nothing changed. Nobody reads the shards: add --execute --reason TEXT to apply.")
	}
	return printLine(a.Out, "\nDry run: nothing changed. Add --execute --reason TEXT to apply (refused while members read the shards; --force makes them hand the shards off first).")
}
