package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// StreamListCmd is "rscoord stream list".
type StreamListCmd struct{}

// streamRow is one stream as "stream list" shows it, built from the groups
// the coordinator reports (the API has no stream listing of its own).
type streamRow struct {
	StreamPrefix    string   `json:"streamPrefix"`
	ShardCount      int      `json:"shardCount"`
	ConsumerGroups  []string `json:"consumerGroups"`
	ActiveMigration string   `json:"activeMigration"`
}

// Run lists every stream, with its consumer groups: GET /monitoring/groups.
func (c *StreamListCmd) Run(ctx context.Context, a *Admin) error {
	var resp protocol.GroupsResponse
	if _, err := a.Client.Do(ctx, http.MethodGet, coordclient.MonitoringPath("groups"), nil, &resp); err != nil {
		return fmt.Errorf("stream list: %w", err)
	}
	byPrefix := map[string]*streamRow{}
	for _, g := range resp.Groups {
		row := byPrefix[g.StreamPrefix]
		if row == nil {
			row = &streamRow{StreamPrefix: g.StreamPrefix, ConsumerGroups: []string{}}
			byPrefix[g.StreamPrefix] = row
		}
		row.ShardCount = max(row.ShardCount, g.ShardCount)
		row.ConsumerGroups = append(row.ConsumerGroups, g.ConsumerGroup)
		if g.ActiveMigration != nil {
			row.ActiveMigration = formatMigration(g.ActiveMigration)
		}
	}
	// A stream without groups (all deleted, say, while a migration is
	// still under way) is listed from the streams the answer carries.
	for _, st := range resp.Streams {
		row := byPrefix[st.StreamPrefix]
		if row == nil {
			row = &streamRow{StreamPrefix: st.StreamPrefix, ConsumerGroups: []string{}}
			byPrefix[st.StreamPrefix] = row
		}
		row.ShardCount = max(row.ShardCount, st.ShardCount)
		if st.ActiveMigration != nil {
			row.ActiveMigration = formatMigration(st.ActiveMigration)
		}
	}
	rows := make([]streamRow, 0, len(byPrefix))
	for _, r := range byPrefix {
		sort.Strings(r.ConsumerGroups)
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].StreamPrefix < rows[j].StreamPrefix })
	if a.JSON {
		v := map[string]any{"streams": rows}
		if len(resp.MissingReplicas) > 0 {
			v["missingReplicas"] = resp.MissingReplicas
		}
		return printValue(a.Out, v)
	}
	if len(rows) == 0 && len(resp.MissingReplicas) == 0 {
		return printLine(a.Out, "No streams.")
	}
	t := newTable(a.Out, "STREAM", "SHARDS", "GROUPS", "ACTIVE MIGRATION")
	for _, r := range rows {
		t.row(r.StreamPrefix, formatInt(r.ShardCount), joinOrNone(r.ConsumerGroups), orNone(r.ActiveMigration))
	}
	if err := t.flush(); err != nil {
		return err
	}
	return printMissing(a, resp.MissingReplicas)
}

// printMissing tells, under a cluster-wide list, which replicas did not
// answer and whose streams are therefore missing from it.
func printMissing(a *Admin, missing []protocol.MissingReplica) error {
	for _, m := range missing {
		streams := "no streams"
		if len(m.Units) > 0 {
			streams = strings.Join(m.Units, ", ")
		}
		if err := printLine(a.Out, "Incomplete: replica %s (%s) did not answer (%s); missing the groups of %s.",
			m.ID, m.AdvertiseURL, m.Error, streams); err != nil {
			return err
		}
	}
	return nil
}

// GroupListCmd is "rscoord group list".
type GroupListCmd struct {
	Prefix string `arg:"" optional:"" help:"Only the groups of this stream prefix."`
}

// Run lists consumer groups: GET /monitoring/groups.
func (c *GroupListCmd) Run(ctx context.Context, a *Admin) error {
	if c.Prefix != "" {
		if err := protocol.ValidateStreamPrefix(c.Prefix); err != nil {
			return fmt.Errorf("group list: %w", err)
		}
	}
	var resp protocol.GroupsResponse
	if _, err := a.Client.Do(ctx, http.MethodGet, coordclient.MonitoringPath("groups"), nil, &resp); err != nil {
		return fmt.Errorf("group list: %w", err)
	}
	groups := []protocol.GroupResponse{}
	for _, g := range resp.Groups {
		if c.Prefix == "" || g.StreamPrefix == c.Prefix {
			groups = append(groups, g)
		}
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].StreamPrefix != groups[j].StreamPrefix {
			return groups[i].StreamPrefix < groups[j].StreamPrefix
		}
		return groups[i].ConsumerGroup < groups[j].ConsumerGroup
	})
	if a.JSON {
		return printValue(a.Out, protocol.GroupsResponse{Groups: groups, MissingReplicas: resp.MissingReplicas})
	}
	if len(groups) == 0 && len(resp.MissingReplicas) == 0 {
		return printLine(a.Out, "No consumer groups.")
	}
	t := newTable(a.Out, "STREAM", "GROUP", "STATE", "SHARDS", "MEMBERS", "GROUP EPOCH", "METADATA VERSION", "ACTIVE MIGRATION")
	for _, g := range groups {
		t.row(g.StreamPrefix, g.ConsumerGroup, string(g.State), formatInt(g.ShardCount),
			formatInt(len(g.TargetAssignmentSummary)), formatInt(g.GroupEpoch), formatInt(g.MetadataVersion),
			formatMigration(g.ActiveMigration))
	}
	if err := t.flush(); err != nil {
		return err
	}
	return printMissing(a, resp.MissingReplicas)
}

// GroupCreateCmd is "rscoord group create".
type GroupCreateCmd struct {
	GroupRef    `embed:""`
	Shards      int    `placeholder:"N" help:"Shard count when the stream does not exist yet (default: the server's --default-shards)."`
	Reason      string `placeholder:"TEXT" help:"Why, for the audit log."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// Run registers the group: POST /streams/{p}/groups/{g}.
func (c *GroupCreateCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("group create"); err != nil {
		return err
	}
	req := protocol.CreateRequest{RequestedBy: c.RequestedBy, Reason: c.Reason}
	if c.Shards != 0 {
		if c.Shards < 1 || c.Shards > protocol.MaxShardCount {
			return fmt.Errorf("group create: --shards %d is outside 1..%d", c.Shards, protocol.MaxShardCount)
		}
		req.InitialShardCount = &c.Shards
	}
	var resp protocol.GroupResponse
	raw, err := a.Client.Do(ctx, http.MethodPost, coordclient.GroupPath(c.Prefix, c.Group), req, &resp)
	if err != nil {
		return fmt.Errorf("group create %s: %w", c.GroupRef, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	return printGroup(a.Out, resp)
}

// ShardsCmd is "rscoord shards".
type ShardsCmd struct {
	AdminFlags `embed:""`
	GroupRef   `embed:""`
}

// Run shows every readable shard as Redis has it now:
// GET /monitoring/streams/{p}/groups/{g}/shards.
func (c *ShardsCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("shards"); err != nil {
		return err
	}
	var resp protocol.ShardsResponse
	raw, err := a.Client.Do(ctx, http.MethodGet, coordclient.MonitoringGroupPath(c.Prefix, c.Group, "shards"), nil, &resp)
	if err != nil {
		return fmt.Errorf("shards %s: %w", c.GroupRef, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	t := newTable(a.Out, "SHARD", "KEY", "SLOT", "LENGTH", "PENDING", "LAG", "LAST ID", "OWNERS", "NOTE")
	for _, s := range resp.Shards {
		var note []string
		if !s.Exists {
			note = append(note, "missing in Redis")
		}
		if s.Draining {
			note = append(note, "draining")
		}
		t.row(formatInt(s.ShardIndex), s.StreamKey, formatInt(s.RedisSlot), formatInt(s.Length), formatInt(s.Pending),
			formatLag(s.Lag), orNone(s.LastGeneratedID), joinOrNone(s.Owners), orNone(strings.Join(note, ", ")))
	}
	return t.flush()
}

// OffsetsCmd is "rscoord offsets": show them (the default), or reset them.
type OffsetsCmd struct {
	AdminFlags `embed:""`

	Show  OffsetsShowCmd  `cmd:"" default:"withargs" help:"Show where a consumer group stands on every shard (the default: rscoord offsets PREFIX GROUP)."`
	Reset OffsetsResetCmd `cmd:"" help:"Move a consumer group's last delivered id on a stream's shards (a dry run unless --execute)."`
}

// OffsetsShowCmd is "rscoord offsets [show]".
type OffsetsShowCmd struct {
	GroupRef `embed:""`
}

// Run shows where the group stands on every readable shard:
// GET /monitoring/streams/{p}/groups/{g}/offsets.
func (c *OffsetsShowCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("offsets"); err != nil {
		return err
	}
	var resp protocol.OffsetsResponse
	raw, err := a.Client.Do(ctx, http.MethodGet, coordclient.MonitoringGroupPath(c.Prefix, c.Group, "offsets"), nil, &resp)
	if err != nil {
		return fmt.Errorf("offsets %s: %w", c.GroupRef, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	t := newTable(a.Out, "SHARD", "KEY", "LAST GENERATED", "LAST DELIVERED", "ENTRIES READ", "PENDING", "LAG")
	for _, o := range resp.Offsets {
		t.row(formatInt(o.ShardIndex), o.StreamKey, orNone(o.LastGeneratedID), orNone(o.LastDeliveredID),
			formatInt(o.EntriesRead), formatInt(o.Pending), formatLag(o.Lag))
	}
	return t.flush()
}

// MessagesCmd is "rscoord messages".
type MessagesCmd struct {
	AdminFlags `embed:""`
	GroupRef   `embed:""`
	Shard      int    `arg:"" help:"Shard index."`
	Cursor     string `placeholder:"ID" help:"Start after this entry id (the cursor a previous page printed)."`
	Limit      int    `default:"20" help:"Entries per page (1..1000)."`
	Backward   bool   `help:"Newest first."`
}

// Run prints one page of a shard's entries (nothing is delivered or
// acknowledged): GET …/shards/{i}/messages.
func (c *MessagesCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("messages"); err != nil {
		return err
	}
	if c.Shard < 0 {
		return fmt.Errorf("messages: shard %d must not be negative", c.Shard)
	}
	if c.Limit < 1 || c.Limit > protocol.MaxMessagesPage {
		return fmt.Errorf("messages: --limit %d is outside 1..%d", c.Limit, protocol.MaxMessagesPage)
	}
	q := url.Values{"limit": {strconv.Itoa(c.Limit)}, "direction": {protocol.DirectionForward}}
	if c.Backward {
		q.Set("direction", protocol.DirectionBackward)
	}
	if c.Cursor != "" {
		q.Set("cursor", c.Cursor)
	}
	var resp protocol.MessagesResponse
	raw, err := a.Client.DoQuery(ctx, http.MethodGet,
		coordclient.ShardMessagesPath(c.Prefix, c.Group, c.Shard), q, nil, &resp)
	if err != nil {
		return fmt.Errorf("messages %s shard %d: %w", c.GroupRef, c.Shard, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	if len(resp.Messages) == 0 {
		if err := printLine(a.Out, "No entries."); err != nil {
			return err
		}
	} else {
		t := newTable(a.Out, "ID", "FIELDS")
		for _, m := range resp.Messages {
			t.row(m.ID, formatFields(m.Fields))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if resp.NextCursor != nil {
		return printLine(a.Out, "\nNext page: --cursor %s", *resp.NextCursor)
	}
	return nil
}

// AuditCmd is "rscoord audit".
type AuditCmd struct {
	AdminFlags `embed:""`
	Stream     string `placeholder:"PREFIX" help:"Only entries of this stream prefix."`
	Limit      int    `default:"20" help:"Entries per page (1..1000)."`
	Before     string `placeholder:"CURSOR" help:"Start below this entry (the cursor a previous page printed)."`
}

// Run prints one page of the audit log, newest first: GET /monitoring/audit.
func (c *AuditCmd) Run(ctx context.Context, a *Admin) error {
	if c.Stream != "" {
		if err := protocol.ValidateStreamPrefix(c.Stream); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if c.Limit < 1 || c.Limit > 1000 {
		return fmt.Errorf("audit: --limit %d is outside 1..1000", c.Limit)
	}
	q := url.Values{"limit": {strconv.Itoa(c.Limit)}}
	if c.Stream != "" {
		q.Set("streamPrefix", c.Stream)
	}
	if c.Before != "" {
		q.Set("before", c.Before)
	}
	var page protocol.AuditPage
	raw, err := a.Client.DoQuery(ctx, http.MethodGet, coordclient.MonitoringPath("audit"), q, nil, &page)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	if len(page.Entries) == 0 {
		if err := printLine(a.Out, "No audit entries."); err != nil {
			return err
		}
	} else {
		t := newTable(a.Out, "TIME", "OPERATION", "TARGET", "BY", "PRINCIPAL", "RESULT", "REASON")
		for _, e := range page.Entries {
			target := e.StreamPrefix
			if e.ConsumerGroup != "" {
				target += "/" + e.ConsumerGroup
			}
			if e.ReshardingID != "" {
				target += " " + e.ReshardingID
			}
			result := fmt.Sprintf("%s %d", e.Result.Outcome, e.Result.Status)
			if e.Result.ErrorCode != "" {
				result += " " + string(e.Result.ErrorCode)
			}
			t.row(e.Time.UTC().Format(time.RFC3339), string(e.Operation), orNone(target), orNone(e.RequestedBy),
				orNone(e.Principal), result, orNone(e.Reason))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if page.Next != nil {
		return printLine(a.Out, "\nNext page: --before %s", *page.Next)
	}
	return nil
}

// formatLag prints a lag, "?" when Redis cannot tell.
func formatLag(lag *int64) string {
	if lag == nil {
		return "?"
	}
	return formatInt(*lag)
}

// formatFields prints an entry's fields as k=v, sorted by name.
func formatFields(fields map[string]any) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, fields[k])
	}
	return orNone(strings.Join(parts, " "))
}

// joinOrNone joins with commas, "-" for none.
func joinOrNone(s []string) string { return orNone(strings.Join(s, ",")) }

// printValue prints v as indented JSON.
func printValue(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return printJSON(w, raw)
}
