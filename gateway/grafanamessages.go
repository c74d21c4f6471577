package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// GrafanaMessageRow is one stream entry of one shard: our columns (id,
// fields as an object) and the reference design's, whose page columns
// repeat on every row so that a table panel can page.
type GrafanaMessageRow struct {
	// StreamPrefix is the stream read.
	StreamPrefix string `json:"streamPrefix"`
	// Shard is the shard read.
	Shard int `json:"shard"`
	// StreamKey is the shard's Redis key.
	StreamKey string `json:"streamKey"`
	// ID is the entry id ("ms-seq").
	ID string `json:"id"`
	// Fields are the entry's field-value pairs; values are strings.
	Fields map[string]any `json:"fields"`

	// The reference design's columns: ShardIndex is Shard, ShardSelector
	// the shardIndex asked for ("all" or a number), ShardLabel
	// ":<shardIndex>", RecordID is ID, FieldsJSON the fields as JSON text,
	// Payload the field "payload" (null without one).
	ConsumerGroup string  `json:"consumerGroup"`
	ShardIndex    int     `json:"shardIndex"`
	ShardSelector string  `json:"shardSelector"`
	ShardLabel    string  `json:"shardLabel"`
	RecordID      string  `json:"recordId"`
	Payload       *string `json:"payload"`
	FieldsJSON    string  `json:"fieldsJson"`
	// PageDirection and PageLimit are the page's; PageNextCursor is the
	// cursor of the next page (null on the last); PageTotalMessages the
	// entries of the shards selected.
	PageDirection     string  `json:"pageDirection"`
	PageLimit         int     `json:"pageLimit"`
	PageNextCursor    *string `json:"pageNextCursor"`
	PageTotalMessages int64   `json:"pageTotalMessages"`
	// RecordTimestampMs and RecordTime are the id's milliseconds.
	RecordTimestampMs *int64     `json:"recordTimestampMs"`
	RecordTime        *time.Time `json:"recordTime"`
}

// Cursors of the message explorer: a tail cursor asks for the page that
// many pages before the last one (the reference design's dashboard sends
// them for its "last page" button).
const (
	lastPageCursor   = "__rsc_last__"
	tailCursorPrefix = "__rsc_tail__:"
	// maxTailRead bounds the entries a tail page reads from the far end.
	maxTailRead = protocol.MaxMessagesPage
	// defaultGrafanaPage is the reference design's page size.
	defaultGrafanaPage = 25
)

// messageQuery is a parsed /monitoring/grafana/messages request.
type messageQuery struct {
	prefix, group, selector, direction, cursor, recordID string
	limit                                                int
}

// grafanaMessages pages through one shard's entries, or every readable
// shard's merged by id (shardIndex=all), or finds one id on every shard
// (recordId).
func (s *server) grafanaMessages(c *gin.Context) {
	q, msg := parseMessageQuery(c)
	if msg != "" {
		abortWith(c, protocol.CodeInvalidRequest, msg)
		return
	}
	ctx := c.Request.Context()
	sh, err := s.coord.Shards(ctx, q.prefix, q.group)
	if err != nil {
		s.writeError(c, err)
		return
	}
	var (
		shards []int
		total  int64
	)
	for _, st := range sh.Shards {
		if q.selector == "all" || strconv.Itoa(st.ShardIndex) == q.selector {
			shards = append(shards, st.ShardIndex)
			total += st.Length
		}
	}
	if len(shards) == 0 {
		abortWith(c, protocol.CodeInvalidRequest, fmt.Sprintf("shard %s is not a readable shard of stream %q", q.selector, q.prefix))
		return
	}
	var (
		entries []shardEntry
		next    *string
	)
	switch {
	case q.recordID != "":
		entries, err = s.findRecord(ctx, q, shards)
	case q.cursor == lastPageCursor || strings.HasPrefix(q.cursor, tailCursorPrefix):
		entries, next, err = s.tailPage(ctx, q, shards, total)
	default:
		entries, next, err = s.mergedPage(ctx, q, shards)
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	rows := make([]GrafanaMessageRow, len(entries))
	for i, e := range entries {
		rows[i] = messageRow(q, e, next, total)
	}
	c.JSON(http.StatusOK, rows)
}

func parseMessageQuery(c *gin.Context) (messageQuery, string) {
	q := messageQuery{prefix: c.Query("streamPrefix"), recordID: strings.TrimSpace(c.Query("recordId")),
		cursor: c.Query("cursor"), limit: defaultGrafanaPage}
	q.group = c.DefaultQuery("consumerGroup", q.prefix)
	if q.prefix == "" || q.group == "" {
		return q, "streamPrefix is required"
	}
	// shard is this endpoint's older name of shardIndex.
	q.selector = strings.TrimPrefix(strings.TrimSpace(cmp.Or(c.Query("shardIndex"), c.Query("shard"), "0")), ":")
	if allShards(q.selector) || q.recordID != "" {
		q.selector = "all"
	} else if n, err := strconv.Atoi(q.selector); err != nil || n < 0 {
		return q, fmt.Sprintf("shardIndex must be a non-negative integer or all, not %q", q.selector)
	}
	q.direction = strings.ToUpper(cmp.Or(c.Query("direction"), protocol.DirectionBackward))
	if q.direction != protocol.DirectionForward && q.direction != protocol.DirectionBackward {
		return q, "direction must be FORWARD or BACKWARD"
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return q, fmt.Sprintf("limit must be an integer (pages hold 1..%d entries)", protocol.MaxMessagesPage)
		}
		// A size outside the range is brought to its nearer end, as the
		// reference design's server does: its message explorer sends
		// what its page-size box holds, and each row's pageLimit says
		// what applied.
		q.limit = min(max(n, 1), protocol.MaxMessagesPage)
	}
	if q.recordID != "" {
		if _, _, ok := parseEntryID(q.recordID); !ok {
			return q, fmt.Sprintf("recordId %q is not a stream entry id (ms-seq)", q.recordID)
		}
	}
	return q, ""
}

// allShards reports whether a shardIndex selects every shard: all, or
// what Grafana sends for a variable's "All" option (.*, $__all, __all).
func allShards(selector string) bool {
	return strings.EqualFold(selector, "all") || selector == ".*" || selector == "$__all" || selector == "__all"
}

// shardEntry is one entry with the shard it was read from.
type shardEntry struct {
	shard int
	key   string
	msg   protocol.StreamMessage
}

// findRecord reads the entry q.recordID from every shard that holds it.
func (s *server) findRecord(ctx context.Context, q messageQuery, shards []int) ([]shardEntry, error) {
	before := entryBefore(q.recordID)
	out := []shardEntry{}
	for _, i := range shards {
		page, err := s.coord.Messages(ctx, q.prefix, q.group, i, before, 1, protocol.DirectionForward)
		if err != nil {
			return nil, err
		}
		if len(page.Messages) == 1 && page.Messages[0].ID == q.recordID {
			out = append(out, shardEntry{i, page.StreamKey, page.Messages[0]})
		}
	}
	return out, nil
}

// mergedPage reads up to q.limit entries of each shard after its cursor
// and keeps the first q.limit in id order. The cursor of one shard is an
// entry id; of several, "<shard>:<id>" pairs joined by commas.
func (s *server) mergedPage(ctx context.Context, q messageQuery, shards []int) ([]shardEntry, *string, error) {
	cursors, err := parseMergedCursor(q.cursor, len(shards) == 1, shards[0])
	if err != nil {
		return nil, nil, err
	}
	all, more, err := s.readShards(ctx, q, shards, cursors, q.limit, q.direction)
	if err != nil {
		return nil, nil, err
	}
	if len(all) > q.limit {
		all, more = all[:q.limit], true
	}
	if !more || len(all) == 0 {
		return all, nil, nil
	}
	if len(shards) == 1 {
		next := all[len(all)-1].msg.ID
		return all, &next, nil
	}
	for _, e := range all {
		cursors[e.shard] = e.msg.ID
	}
	parts := make([]string, 0, len(cursors))
	for _, i := range shards {
		if id, ok := cursors[i]; ok {
			parts = append(parts, strconv.Itoa(i)+":"+id)
		}
	}
	next := strings.Join(parts, ",")
	return all, &next, nil
}

// readShards reads up to n entries of each shard after its cursor, in
// direction, merged in id order; more is true when some shard has more.
func (s *server) readShards(ctx context.Context, q messageQuery, shards []int, cursors map[int]string, n int, direction string) ([]shardEntry, bool, error) {
	var all []shardEntry
	more := false
	for _, i := range shards {
		page, err := s.coord.Messages(ctx, q.prefix, q.group, i, cursors[i], n, direction)
		if err != nil {
			return nil, false, err
		}
		more = more || page.NextCursor != nil
		for _, m := range page.Messages {
			all = append(all, shardEntry{i, page.StreamKey, m})
		}
	}
	slices.SortStableFunc(all, func(a, b shardEntry) int {
		c := cmp.Or(compareIDs(a.msg.ID, b.msg.ID), cmp.Compare(a.shard, b.shard))
		if direction == protocol.DirectionBackward {
			return -c
		}
		return c
	})
	return all, more, nil
}

// tailPage answers the page a tail cursor names, counted from the last
// page of total entries: it reads from the far end, in the opposite
// direction, the entries of that page and of every page after it.
func (s *server) tailPage(ctx context.Context, q messageQuery, shards []int, total int64) ([]shardEntry, *string, error) {
	distance := int64(0)
	if q.cursor != lastPageCursor {
		d, err := strconv.ParseInt(strings.TrimPrefix(q.cursor, tailCursorPrefix), 10, 64)
		if err != nil || d < 0 {
			return nil, nil, protocol.Errorf(protocol.CodeInvalidRequest, "a tail cursor ends in a non-negative page count")
		}
		distance = d
	}
	limit := int64(q.limit)
	last := max(0, (total+limit-1)/limit-1)
	page := max(0, last-distance)
	need := total - page*limit
	if need > maxTailRead {
		return nil, nil, protocol.Errorf(protocol.CodeInvalidRequest,
			fmt.Sprintf("that page lies %d entries from the end; at most %d are read from it: page from the start instead", need, maxTailRead))
	}
	var next *string
	if d := last - page; d > 0 {
		c := tailCursorPrefix + strconv.FormatInt(d-1, 10)
		next = &c
	}
	if need <= 0 {
		return []shardEntry{}, next, nil
	}
	opposite := protocol.DirectionForward
	if q.direction == protocol.DirectionForward {
		opposite = protocol.DirectionBackward
	}
	far, _, err := s.readShards(ctx, q, shards, map[int]string{}, int(need), opposite)
	if err != nil {
		return nil, nil, err
	}
	far = far[:min(len(far), int(need))]
	slices.Reverse(far)
	return far[:min(len(far), q.limit)], next, nil
}

func parseMergedCursor(cursor string, single bool, only int) (map[int]string, error) {
	out := map[int]string{}
	if cursor == "" {
		return out, nil
	}
	bad := protocol.Errorf(protocol.CodeInvalidRequest, "cursor is not one this endpoint returned")
	if single && !strings.Contains(cursor, ":") {
		if _, _, ok := parseEntryID(cursor); !ok {
			return nil, bad
		}
		out[only] = cursor
		return out, nil
	}
	for part := range strings.SplitSeq(cursor, ",") {
		shard, id, ok := strings.Cut(part, ":")
		i, err := strconv.Atoi(shard)
		if _, _, valid := parseEntryID(id); !ok || err != nil || i < 0 || !valid {
			return nil, bad
		}
		out[i] = id
	}
	return out, nil
}

func messageRow(q messageQuery, e shardEntry, next *string, total int64) GrafanaMessageRow {
	rec := protocol.NewStreamMessageRecord(q.prefix, q.group, e.shard, e.key, e.msg)
	fields, err := json.Marshal(e.msg.Fields)
	if err != nil {
		fields = []byte("{}")
	}
	return GrafanaMessageRow{
		StreamPrefix: q.prefix, Shard: e.shard, StreamKey: e.key, ID: e.msg.ID, Fields: e.msg.Fields,
		ConsumerGroup: q.group, ShardIndex: e.shard, ShardSelector: q.selector, ShardLabel: ":" + strconv.Itoa(e.shard),
		RecordID: e.msg.ID, Payload: rec.Payload, FieldsJSON: string(fields),
		PageDirection: q.direction, PageLimit: q.limit, PageNextCursor: next, PageTotalMessages: total,
		RecordTimestampMs: rec.RecordTimestampMs, RecordTime: rec.RecordTime,
	}
}

// parseEntryID splits a stream entry id "ms-seq".
func parseEntryID(id string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	ms, errA := strconv.ParseUint(a, 10, 64)
	seq, errB := strconv.ParseUint(b, 10, 64)
	return ms, seq, found && errA == nil && errB == nil
}

// compareIDs orders two valid entry ids.
func compareIDs(a, b string) int {
	am, as, _ := parseEntryID(a)
	bm, bs, _ := parseEntryID(b)
	return cmp.Or(cmp.Compare(am, bm), cmp.Compare(as, bs))
}

// entryBefore is the id just before id ("" for 0-0): a FORWARD read after
// it starts at id.
func entryBefore(id string) string {
	ms, seq, _ := parseEntryID(id)
	switch {
	case seq > 0:
		return strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq-1, 10)
	case ms > 0:
		return strconv.FormatUint(ms-1, 10) + "-" + strconv.FormatUint(math.MaxUint64, 10)
	}
	return ""
}
