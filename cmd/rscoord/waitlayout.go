package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// waitLayout follows migration id of prefix until its new layout is in
// use: the migration is ACTIVE or later (producers route to the new
// count at their next refresh) and every group of the stream reads that
// count, STABLE or EMPTY. It prints each change with what it still waits
// for. What is left (the routing lease, a scale-in's removed shards
// draining) goes on in the background and needs nobody to wait for it.
// A rolled back migration is an error: the layout did not change.
func waitLayout(ctx context.Context, a *Admin, prefix, group, id string, poll time.Duration) error {
	last := ""
	return followMigration(ctx, a, prefix, group, id, poll, func(m protocol.Migration, raw []byte) (bool, error) {
		line := fmt.Sprintf("%s %s (%d → %d)", m.ReshardingID, m.State, m.FromShardCount, m.ToShardCount)
		waiting := ""
		switch m.State {
		case protocol.MigrationPreparing:
			waiting = "the new shard keys and consumer groups in Redis"
			if m.Detail != "" {
				waiting += " (" + m.Detail + ")"
			}
		case protocol.MigrationRollingBack, protocol.MigrationRolledBack:
			if err := printChange(a, raw, line); err != nil {
				return true, err
			}
			return true, fmt.Errorf("wait for migration %s: it was rolled back; the stream keeps %d shards", id, m.FromShardCount)
		default:
			behind, err := groupsBehind(ctx, a, prefix, m.ToShardCount)
			if err != nil {
				return true, fmt.Errorf("wait for migration %s: %w", id, err)
			}
			if len(behind) > 0 {
				waiting = "every group to read " + formatInt(m.ToShardCount) + " shards: " + strings.Join(behind, ", ")
			}
		}
		if waiting == "" {
			if a.JSON {
				return true, printChange(a, raw, "")
			}
			done := fmt.Sprintf("%s done (%d → %d): producers and every group use %d shards", m.ReshardingID, m.FromShardCount, m.ToShardCount, m.ToShardCount)
			if m.State != protocol.MigrationDeprecated {
				done += fmt.Sprintf("; the migration ends in the background (now %s; rscoord stream migrations %s --wait follows it)", m.State, prefix)
			}
			return true, printLine(a.Out, "%s %s", time.Now().UTC().Format(time.TimeOnly), done)
		}
		text := line + "; waiting for " + waiting
		if text != last {
			if err := printChange(a, raw, text); err != nil {
				return true, err
			}
			last = text
		}
		return false, nil
	})
}

// groupsBehind names the groups of prefix that do not read count shards
// yet, or are still moving shards between members.
func groupsBehind(ctx context.Context, a *Admin, prefix string, count int) ([]string, error) {
	var resp protocol.GroupsResponse
	if _, err := a.Client.Do(ctx, http.MethodGet, coordclient.MonitoringPath("groups"), nil, &resp); err != nil {
		return nil, err
	}
	var behind []string
	for _, g := range resp.Groups {
		if g.StreamPrefix != prefix {
			continue
		}
		if g.ShardCount != count || (g.State != protocol.GroupStable && g.State != protocol.GroupEmpty) {
			behind = append(behind, fmt.Sprintf("%s (%s, %d shards)", g.ConsumerGroup, g.State, g.ShardCount))
		}
	}
	return behind, nil
}
