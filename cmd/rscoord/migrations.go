package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// WaitFlags make a migration command follow the migration until it ends.
type WaitFlags struct {
	Wait bool          `help:"Follow the migration, printing each change (with --json: the migration as one JSON object per line), until it is DEPRECATED or ROLLED_BACK (Ctrl-C stops following, not the migration)."`
	Poll time.Duration `default:"1s" help:"How often --wait asks the coordinator."`
}

// StreamMigrationsCmd is "rscoord stream migrations".
type StreamMigrationsCmd struct {
	Prefix string `arg:"" help:"Stream prefix."`
	Group  string `placeholder:"GROUP" help:"Consumer group to read through (default: the stream's default group, named like the prefix)."`
	WaitFlags
}

// Run lists the stream's migrations: GET
// /monitoring/streams/{p}/groups/{g}/migrations; with --wait it then
// follows the active one.
func (c *StreamMigrationsCmd) Run(ctx context.Context, a *Admin) error {
	group, err := groupOf(c.Prefix, c.Group)
	if err != nil {
		return fmt.Errorf("stream migrations: %w", err)
	}
	resp, raw, err := fetchMigrations(ctx, a, c.Prefix, group)
	if err != nil {
		return fmt.Errorf("stream migrations %s: %w", c.Prefix, err)
	}
	if a.JSON {
		if err := printJSON(a.Out, raw); err != nil {
			return err
		}
	} else if err := printMigrations(a, resp.Migrations); err != nil {
		return err
	}
	if !c.Wait || resp.ActiveReshardingID == nil {
		return nil
	}
	return waitMigration(ctx, a, c.Prefix, group, *resp.ActiveReshardingID, c.Poll)
}

// StreamRollbackCmd is "rscoord stream rollback".
type StreamRollbackCmd struct {
	Prefix      string `arg:"" help:"Stream prefix."`
	ID          string `arg:"" name:"resharding-id" help:"Migration to roll back (only while ACTIVE)."`
	Reason      string `required:"" placeholder:"TEXT" help:"Why, for the audit log."`
	Group       string `placeholder:"GROUP" help:"Consumer group of the request path (default: the stream's default group)."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// Run rolls the migration back: POST
// /streams/{p}/groups/{g}/migrations/{id}/rollback.
func (c *StreamRollbackCmd) Run(ctx context.Context, a *Admin) error {
	group, err := groupOf(c.Prefix, c.Group)
	if err != nil {
		return fmt.Errorf("stream rollback: %w", err)
	}
	if strings.TrimSpace(c.Reason) == "" {
		return fmt.Errorf("stream rollback: --reason must not be blank")
	}
	req := protocol.OperatorRequest{RequestedBy: c.RequestedBy, Reason: c.Reason}
	var m protocol.Migration
	raw, err := a.Client.Do(ctx, http.MethodPost, coordclient.RollbackPath(c.Prefix, group, c.ID), req, &m)
	if err != nil {
		return fmt.Errorf("stream rollback %s %s: %w", c.Prefix, c.ID, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	return printMigrations(a, []protocol.Migration{m})
}

// StreamCompleteCmd is "rscoord stream complete".
type StreamCompleteCmd struct {
	Prefix      string `arg:"" help:"Stream prefix."`
	ID          string `arg:"" name:"resharding-id" help:"Migration whose removed shards to retire without a drain proof."`
	Reason      string `required:"" placeholder:"TEXT" help:"Why, for the audit log (e.g. pending entries nobody will claim)."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// Run force-retires the migration's removed shards: POST
// /streams/{p}/migrations/{id}/complete. Records still in them are given
// up: that is the operator's decision, recorded in the audit log.
func (c *StreamCompleteCmd) Run(ctx context.Context, a *Admin) error {
	if err := protocol.ValidateStreamPrefix(c.Prefix); err != nil {
		return fmt.Errorf("stream complete: %w", err)
	}
	if strings.TrimSpace(c.Reason) == "" {
		return fmt.Errorf("stream complete: --reason must not be blank")
	}
	req := protocol.OperatorRequest{RequestedBy: c.RequestedBy, Reason: c.Reason}
	var m protocol.Migration
	raw, err := a.Client.Do(ctx, http.MethodPost, coordclient.CompletePath(c.Prefix, c.ID), req, &m)
	if err != nil {
		return fmt.Errorf("stream complete %s %s: %w", c.Prefix, c.ID, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	return printMigrations(a, []protocol.Migration{m})
}

// groupOf checks prefix and group, defaulting group to the prefix.
func groupOf(prefix, group string) (string, error) {
	if err := protocol.ValidateStreamPrefix(prefix); err != nil {
		return "", err
	}
	if group == "" {
		group = prefix
	}
	if err := protocol.ValidateConsumerGroup(group); err != nil {
		return "", err
	}
	return group, nil
}

func fetchMigrations(ctx context.Context, a *Admin, prefix, group string) (protocol.MigrationsResponse, []byte, error) {
	var resp protocol.MigrationsResponse
	raw, err := a.Client.Do(ctx, http.MethodGet, coordclient.MonitoringGroupPath(prefix, group, "migrations"), nil, &resp)
	return resp, raw, err
}

// waitMigration polls migration id every poll and prints a line each time
// its state or detail changes, until it is final or ctx ends. Under --json
// the line is the migration as the server answered it.
func waitMigration(ctx context.Context, a *Admin, prefix, group, id string, poll time.Duration) error {
	last := ""
	return followMigration(ctx, a, prefix, group, id, poll, func(m protocol.Migration, raw []byte) (bool, error) {
		line := fmt.Sprintf("%s %s (%d → %d)", m.ReshardingID, m.State, m.FromShardCount, m.ToShardCount)
		if m.Detail != "" {
			line += ": " + m.Detail
		}
		if line != last {
			if err := printChange(a, raw, line); err != nil {
				return true, err
			}
			last = line
		}
		return m.State == protocol.MigrationDeprecated || m.State == protocol.MigrationRolledBack, nil
	})
}

// followMigration reads migration id every poll (a second when poll is not
// positive) and hands each answer to step, until step says stop or fails,
// or ctx ends.
func followMigration(ctx context.Context, a *Admin, prefix, group, id string, poll time.Duration,
	step func(m protocol.Migration, raw []byte) (stop bool, err error)) error {
	if poll <= 0 {
		poll = time.Second
	}
	for {
		var m protocol.Migration
		raw, err := a.Client.Do(ctx, http.MethodGet, coordclient.MigrationPath(prefix, group, id), nil, &m)
		if err != nil {
			return fmt.Errorf("wait for migration %s: %w", id, err)
		}
		if stop, err := step(m, raw); stop || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for migration %s: %w (it goes on without us)", id, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// printChange prints one change of a followed migration: the time and
// line, or under --json the server's answer on one line.
func printChange(a *Admin, raw []byte, line string) error {
	if !a.JSON {
		return printLine(a.Out, "%s %s", time.Now().UTC().Format(time.TimeOnly), line)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fmt.Errorf("print JSON: %w", err)
	}
	return printLine(a.Out, "%s", buf.Bytes())
}
