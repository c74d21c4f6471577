package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// none stands for an empty or absent value in a table cell.
const none = "-"

// table prints aligned columns with text/tabwriter. Write errors are kept
// and reported once by flush.
type table struct {
	tw *tabwriter.Writer
}

// newTable starts a table on w; headers, if any, become its first row.
func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(headers) > 0 {
		t.row(headers...)
	}
	return t
}

// row adds one row. Tabs and newlines inside cells are replaced so that a
// cell can never break the layout.
func (t *table) row(cells ...string) {
	clean := make([]string, len(cells))
	for i, c := range cells {
		clean[i] = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
	}
	// tabwriter keeps the first write error and returns it from Flush.
	_, _ = io.WriteString(t.tw, strings.Join(clean, "\t")+"\n")
}

// flush writes the table out.
func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// printJSON writes a JSON answer indented, followed by a newline. The content
// and field order are the server's.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("print JSON: %w", err)
	}
	buf.WriteByte('\n')
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("print JSON: %w", err)
	}
	return nil
}

// printLine writes one line of text.
func printLine(w io.Writer, format string, args ...any) error {
	if _, err := fmt.Fprintf(w, format+"\n", args...); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// formatShards renders shards as "0,1,5", or "-" when there are none.
func formatShards(shards []protocol.Shard) string {
	if len(shards) == 0 {
		return none
	}
	idx := protocol.Indexes(shards)
	parts := make([]string, len(idx))
	for i, s := range idx {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ",")
}

// formatTime renders t in RFC 3339 UTC, or "-" when absent.
func formatTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// formatInt renders an integer cell.
func formatInt[T ~int | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

// formatMigration renders a migration as "id (4→8 ACTIVE)", or "-".
func formatMigration(m *protocol.Migration) string {
	if m == nil {
		return none
	}
	return fmt.Sprintf("%s (%d→%d %s)", m.ReshardingID, m.FromShardCount, m.ToShardCount, m.State)
}

// orNone renders an empty string as "-".
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// sortedKeys returns the union of the keys of maps, sorted.
func sortedKeys[V any](maps ...map[string]V) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// printGroup prints a GroupResponse as a key/value table followed by the
// target and current shard counts of each member.
func printGroup(w io.Writer, g protocol.GroupResponse) error {
	kv := newTable(w)
	kv.row("STREAM PREFIX", g.StreamPrefix)
	kv.row("CONSUMER GROUP", g.ConsumerGroup)
	kv.row("STATE", string(g.State))
	kv.row("SHARD COUNT", formatInt(g.ShardCount))
	kv.row("GROUP EPOCH", formatInt(g.GroupEpoch))
	kv.row("ASSIGNMENT EPOCH", formatInt(g.AssignmentEpoch))
	kv.row("METADATA VERSION", formatInt(g.MetadataVersion))
	kv.row("ACTIVE MIGRATION", formatMigration(g.ActiveMigration))
	if err := kv.flush(); err != nil {
		return err
	}
	members := sortedKeys(g.TargetAssignmentSummary, g.CurrentAssignmentSummary)
	if len(members) == 0 {
		return printLine(w, "\nNo members.")
	}
	if err := printLine(w, ""); err != nil {
		return err
	}
	t := newTable(w, "MEMBER", "TARGET SHARDS", "CURRENT SHARDS")
	for _, m := range members {
		t.row(m, formatInt(g.TargetAssignmentSummary[m]), formatInt(g.CurrentAssignmentSummary[m]))
	}
	return t.flush()
}
