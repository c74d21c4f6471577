package actors

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/clienttext"
	"github.com/rscoord/rscoord/persistence"
)

// Audit page sizes.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// RecordAudit appends entry to the durable audit log (synced) and returns
// its id. It goes straight to the store: audit entries belong to no actor,
// and each is written once and never changed. It works during shutdown too,
// so that refusals of the last requests are recorded.
func (c *Coordinator) RecordAudit(ctx context.Context, entry protocol.AuditEntry) (string, error) {
	start := time.Now()
	seq, err := c.env.store.AppendAudit(ctx, entry)
	c.env.obs.StoreWrite("audit", time.Since(start), err)
	if err != nil {
		return "", fmt.Errorf("record audit entry: %w", err)
	}
	return strconv.FormatUint(seq, 10), nil
}

// Audit pages the audit log newest first: at most limit entries (0:
// [DefaultAuditLimit]; at most [MaxAuditLimit]) of streamPrefix ("" for
// all) older than the cursor before ("" for the newest). Next is the
// cursor of the following page, nil on the last one.
func (c *Coordinator) Audit(ctx context.Context, streamPrefix, before string, limit int) (protocol.AuditPage, error) {
	page := protocol.AuditPage{Entries: []protocol.AuditEntry{}}
	if streamPrefix != "" {
		if err := protocol.ValidateStreamPrefix(streamPrefix); err != nil {
			return page, invalid(err)
		}
	}
	if limit == 0 {
		limit = DefaultAuditLimit
	}
	if limit < 1 || limit > MaxAuditLimit {
		return page, protocol.Errorf(protocol.CodeInvalidRequest, fmt.Sprintf("limit %d is outside 1..%d", limit, MaxAuditLimit))
	}
	var cursor uint64
	if before != "" {
		v, err := strconv.ParseUint(before, 10, 64)
		if err != nil || v == 0 {
			return page, protocol.Errorf(protocol.CodeInvalidRequest, fmt.Sprintf("before %s is not a cursor of this log", clienttext.Quote(before)))
		}
		cursor = v
	}
	// One more than asked tells whether another page exists.
	recs, err := c.env.store.ListAudit(ctx, persistence.AuditQuery{StreamPrefix: streamPrefix, Before: cursor, Limit: limit + 1})
	if err != nil {
		return page, storeError("list audit", err)
	}
	for i, r := range recs {
		if i == limit {
			next := page.Entries[limit-1].ID
			page.Next = &next
			break
		}
		e := r.Entry
		if r.Err != nil {
			// Show the damage rather than hide the entry.
			e = protocol.AuditEntry{ID: strconv.FormatUint(r.Seq, 10), Operation: "UNREADABLE", Reason: r.Err.Error(), Roles: []string{}}
		}
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}
