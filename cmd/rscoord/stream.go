package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// StreamCmd groups the stream commands.
type StreamCmd struct {
	AdminFlags `embed:""`

	List       StreamListCmd       `cmd:"" help:"List the streams, with their consumer groups and active migration."`
	Create     StreamCreateCmd     `cmd:"" help:"Create a stream and its default consumer group (named like the prefix)."`
	Scale      StreamScaleCmd      `cmd:"" help:"Change the shard count of a stream (every group of it)."`
	Rollback   StreamRollbackCmd   `cmd:"" help:"Roll back an ACTIVE migration."`
	Complete   StreamCompleteCmd   `cmd:"" help:"Retire a migration's removed shards whose drain cannot be proven (operator decision, audited)."`
	Migrations StreamMigrationsCmd `cmd:"" help:"List a stream's migrations; --wait follows the active one."`
	Status     StreamStatusCmd     `cmd:"" help:"Show every consumer group of a stream."`
	Autoscale  StreamAutoscaleCmd  `cmd:"" help:"Show or set a stream's autoscaling policy (set: ADMIN)."`
	Delete     StreamDeleteCmd     `cmd:"" help:"Delete a stream (--force: with its groups; --delete-keys: and its shard keys)."`
}

// StreamCreateCmd is "rscoord stream create".
type StreamCreateCmd struct {
	Prefix      string `arg:"" help:"Stream prefix: shards are the Redis keys PREFIX:0..N-1."`
	Shards      *int   `placeholder:"N" help:"Initial shard count (default: the server's --default-shards)."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
	Reason      string `placeholder:"TEXT" help:"Why, for the audit log."`
	ExistOK     bool   `name:"exist-ok" help:"An existing stream of that prefix is a success (its shard count is left as it is): for set-up scripts that may run twice."`
}

// Run creates the stream: POST /streams/{prefix}.
func (c *StreamCreateCmd) Run(ctx context.Context, a *Admin) error {
	if err := protocol.ValidateStreamPrefix(c.Prefix); err != nil {
		return fmt.Errorf("stream create: %w", err)
	}
	if c.Shards != nil && *c.Shards < 1 {
		return fmt.Errorf("stream create: --shards %d: must be at least 1", *c.Shards)
	}
	req := protocol.CreateRequest{InitialShardCount: c.Shards, RequestedBy: c.RequestedBy, Reason: c.Reason}
	var resp protocol.StreamResponse
	raw, err := a.Client.Do(ctx, http.MethodPost, coordclient.StreamPath(c.Prefix), req, &resp)
	var apiErr *APIError
	if c.ExistOK && errors.As(err, &apiErr) && apiErr.Body.ErrorCode == protocol.CodeStreamPrefixAlreadyExists {
		if a.JSON {
			raw, _ := json.Marshal(struct {
				StreamPrefix string `json:"streamPrefix"`
				Existed      bool   `json:"existed"`
			}{c.Prefix, true}) // a string and a bool always encode
			return printJSON(a.Out, raw)
		}
		return printLine(a.Out, "stream %s exists already", c.Prefix)
	}
	if err != nil {
		return fmt.Errorf("stream create %s: %w", c.Prefix, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	t := newTable(a.Out)
	t.row("STREAM PREFIX", resp.StreamPrefix)
	t.row("SHARD COUNT", formatInt(resp.ShardCount))
	t.row("METADATA VERSION", formatInt(resp.MetadataVersion))
	return t.flush()
}

// StreamScaleCmd is "rscoord stream scale".
type StreamScaleCmd struct {
	Prefix      string        `arg:"" help:"Stream prefix."`
	To          int           `required:"" placeholder:"N" help:"Target shard count (0 retires every shard)."`
	Reason      string        `required:"" placeholder:"TEXT" help:"Why, for the audit log."`
	RequestedBy string        `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
	Wait        bool          `help:"Wait until the new layout is in use: producers route to the new count and every group reads it (the removed shards of a scale-in then drain in the background). Prints what it still waits for; Ctrl-C stops waiting, not the migration."`
	Poll        time.Duration `default:"1s" help:"How often --wait asks the coordinator."`
}

// Run starts the migration: POST /streams/{prefix}/scale.
func (c *StreamScaleCmd) Run(ctx context.Context, a *Admin) error {
	if err := protocol.ValidateStreamPrefix(c.Prefix); err != nil {
		return fmt.Errorf("stream scale: %w", err)
	}
	if c.To < 0 {
		return fmt.Errorf("stream scale: --to %d: must not be negative", c.To)
	}
	if strings.TrimSpace(c.Reason) == "" {
		return fmt.Errorf("stream scale: --reason must not be blank")
	}
	to := c.To
	req := protocol.ScaleRequest{TargetShardCount: &to, RequestedBy: c.RequestedBy, Reason: c.Reason}
	var resp protocol.ScaleResponse
	raw, err := a.Client.Do(ctx, http.MethodPost, coordclient.StreamScalePath(c.Prefix), req, &resp)
	if err != nil {
		return fmt.Errorf("stream scale %s: %w", c.Prefix, err)
	}
	if a.JSON {
		if err := printJSON(a.Out, raw); err != nil {
			return err
		}
	} else if err := printScale(a, resp); err != nil {
		return err
	}
	if !c.Wait || len(resp.Migrations) == 0 || resp.Migrations[0].ReshardingID == protocol.NoopReshardingID {
		return nil
	}
	if len(resp.AffectedConsumerGroups) == 0 {
		// A migration is read through a group: with none there is nothing
		// to follow, which --wait says instead of returning as if done.
		if a.JSON {
			return nil
		}
		id := resp.Migrations[0].ReshardingID
		return printLine(a.Out, "--wait: stream %s has no consumer group to follow %s through: it goes on once a group is created on the stream, or ends with rscoord stream complete %s %s --reason …",
			c.Prefix, id, c.Prefix, id)
	}
	return waitLayout(ctx, a, c.Prefix, resp.AffectedConsumerGroups[0], resp.Migrations[0].ReshardingID, c.Poll)
}

// printScale prints a scale answer: the groups it affects, then the
// migration as each group sees it.
func printScale(a *Admin, resp protocol.ScaleResponse) error {
	groups := none
	if len(resp.AffectedConsumerGroups) > 0 {
		groups = strings.Join(resp.AffectedConsumerGroups, ", ")
	}
	if err := printLine(a.Out, "Scaling %s to %d shards; affected consumer groups: %s\n",
		resp.StreamPrefix, resp.TargetShardCount, groups); err != nil {
		return err
	}
	if len(resp.Migrations) == 0 || len(resp.Migrations) != len(resp.AffectedConsumerGroups) {
		return printMigrations(a, resp.Migrations)
	}
	// The answer holds the stream's one migration once per group, in the
	// order of the groups: without the group, the rows look repeated.
	t := newTable(a.Out, "GROUP", "RESHARDING ID", "FROM", "TO", "STATE", "CREATED", "UPDATED", "DETAIL")
	for i, m := range resp.Migrations {
		t.row(resp.AffectedConsumerGroups[i], m.ReshardingID, formatInt(m.FromShardCount), formatInt(m.ToShardCount),
			string(m.State), formatTime(&m.CreatedAt), formatTime(&m.UpdatedAt), orNone(m.Detail))
	}
	return t.flush()
}

// printMigrations prints a migrations table, or says there is none.
func printMigrations(a *Admin, migrations []protocol.Migration) error {
	if len(migrations) == 0 {
		return printLine(a.Out, "No migrations.")
	}
	t := newTable(a.Out, "RESHARDING ID", "FROM", "TO", "STATE", "CREATED", "UPDATED", "DETAIL")
	for _, m := range migrations {
		t.row(m.ReshardingID, formatInt(m.FromShardCount), formatInt(m.ToShardCount), string(m.State),
			formatTime(&m.CreatedAt), formatTime(&m.UpdatedAt), orNone(m.Detail))
	}
	return t.flush()
}

// StreamStatusCmd is "rscoord stream status".
type StreamStatusCmd struct {
	Prefix string `arg:"" help:"Stream prefix."`
}

// Run lists the groups of the stream: GET /monitoring/groups, filtered to
// the prefix. With --json it prints {"groups": [...]} of that prefix only.
func (c *StreamStatusCmd) Run(ctx context.Context, a *Admin) error {
	if err := protocol.ValidateStreamPrefix(c.Prefix); err != nil {
		return fmt.Errorf("stream status: %w", err)
	}
	var resp protocol.GroupsResponse
	if _, err := a.Client.Do(ctx, http.MethodGet, coordclient.MonitoringPath("groups"), nil, &resp); err != nil {
		return fmt.Errorf("stream status %s: %w", c.Prefix, err)
	}
	groups := []protocol.GroupResponse{}
	for _, g := range resp.Groups {
		if g.StreamPrefix == c.Prefix {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		// The API has no per-stream read; without a group we cannot tell a
		// missing stream from one whose groups were all deleted.
		return fmt.Errorf("stream status %s: %w", c.Prefix, &APIError{
			StatusCode: http.StatusNotFound,
			Body: protocol.NewErrorBody(protocol.CodeStreamNotFound,
				fmt.Sprintf("no consumer group of stream %q on %s", c.Prefix, a.Client.base)),
		})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].ConsumerGroup < groups[j].ConsumerGroup })
	if a.JSON {
		raw, err := json.Marshal(protocol.GroupsResponse{Groups: groups})
		if err != nil {
			return fmt.Errorf("stream status %s: encode: %w", c.Prefix, err)
		}
		return printJSON(a.Out, raw)
	}
	t := newTable(a.Out, "GROUP", "STATE", "SHARDS", "GROUP EPOCH", "ASSIGNMENT EPOCH", "METADATA VERSION", "MEMBERS", "ACTIVE MIGRATION")
	for _, g := range groups {
		t.row(g.ConsumerGroup, string(g.State), formatInt(g.ShardCount), formatInt(g.GroupEpoch),
			formatInt(g.AssignmentEpoch), formatInt(g.MetadataVersion),
			formatInt(len(g.TargetAssignmentSummary)), formatMigration(g.ActiveMigration))
	}
	return t.flush()
}
