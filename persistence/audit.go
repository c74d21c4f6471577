package persistence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// AuditRecord is one stored audit entry.
type AuditRecord struct {
	// Seq orders entries: higher is newer. It is set by [Store.AppendAudit]
	// and is unique for the life of the data directory (audit sequences
	// are store revisions).
	Seq uint64
	// Entry is the decoded entry; its ID is Seq in decimal. Zero when Err
	// is set.
	Entry protocol.AuditEntry
	// Err is set, on load only, when the stored entry does not decode: it
	// wraps [ErrCorrupt] or [ErrUnknownSchema]. Such entries are listed
	// (with Seq) so that a damaged audit log shows its damage.
	Err error
}

// AuditQuery selects audit entries for [Store.ListAudit].
type AuditQuery struct {
	// StreamPrefix keeps only entries of that stream; "" keeps all. Entries
	// that do not decode are kept only without a filter.
	StreamPrefix string
	// Before keeps only entries with Seq < Before; 0 starts at the newest.
	Before uint64
	// Limit is the largest number of entries returned; it must be >= 1.
	Limit int
}

// auditV1 is the payload of an audit entry, schema version 1. Like every
// payload it is decoupled from the protocol type it mirrors.
type auditV1 struct {
	Time              time.Time  `json:"time"`
	Operation         string     `json:"operation"`
	StreamPrefix      string     `json:"streamPrefix,omitempty"`
	ConsumerGroup     string     `json:"consumerGroup,omitempty"`
	ReshardingID      string     `json:"reshardingId,omitempty"`
	InitialShardCount *int       `json:"initialShardCount,omitempty"`
	TargetShardCount  *int       `json:"targetShardCount,omitempty"`
	Force             *bool      `json:"force,omitempty"`
	DeleteKeys        *bool      `json:"deleteKeys,omitempty"`
	DeprecatedAfter   *time.Time `json:"deprecatedAfter,omitempty"`
	RequestedBy       string     `json:"requestedBy,omitempty"`
	Reason            string     `json:"reason,omitempty"`
	Principal         string     `json:"principal,omitempty"`
	Roles             []string   `json:"roles"`
	AuthMethod        string     `json:"authMethod,omitempty"`
	RequestID         string     `json:"requestId,omitempty"`
	ClientAddress     string     `json:"clientAddress,omitempty"`
	UserAgent         string     `json:"userAgent,omitempty"`
	Method            string     `json:"method"`
	Route             string     `json:"route"`
	DurationNanos     int64      `json:"durationNanos"`
	BodySHA256        string     `json:"bodySha256,omitempty"`
	Outcome           string     `json:"outcome"`
	Status            int        `json:"status"`
	ErrorCode         string     `json:"errorCode,omitempty"`
}

const kindAudit = "audit"

func encodeAudit(e protocol.AuditEntry) ([]byte, error) {
	if e.Operation == "" || e.Time.IsZero() {
		return nil, errors.New("persistence: audit entry without operation or time")
	}
	roles := e.Roles
	if roles == nil {
		roles = []string{}
	}
	var deprecatedAfter *time.Time
	if e.Requested.DeprecatedAfter != nil {
		t := e.Requested.DeprecatedAfter.UTC()
		deprecatedAfter = &t
	}
	return json.Marshal(auditV1{
		Time: e.Time.UTC(), Operation: string(e.Operation),
		StreamPrefix: e.StreamPrefix, ConsumerGroup: e.ConsumerGroup, ReshardingID: e.ReshardingID,
		InitialShardCount: e.Requested.InitialShardCount, TargetShardCount: e.Requested.TargetShardCount,
		Force: e.Requested.Force, DeleteKeys: e.Requested.DeleteKeys, DeprecatedAfter: deprecatedAfter,
		RequestedBy: e.RequestedBy, Reason: e.Reason,
		Principal: e.Principal, Roles: roles, AuthMethod: e.AuthMethod,
		RequestID: e.RequestID, ClientAddress: e.ClientAddress, UserAgent: e.UserAgent,
		Method: e.Method, Route: e.Route, DurationNanos: int64(time.Duration(e.DurationMs * float64(time.Millisecond))),
		BodySHA256: e.BodySHA256, Outcome: e.Result.Outcome, Status: e.Result.Status, ErrorCode: string(e.Result.ErrorCode),
	})
}

func decodeAudit(payload []byte, seq uint64) (protocol.AuditEntry, error) {
	var a auditV1
	if err := strictUnmarshal(payload, &a); err != nil {
		return protocol.AuditEntry{}, newErr(ErrCorrupt, "audit payload: %v", err)
	}
	roles := a.Roles
	if roles == nil {
		roles = []string{}
	}
	return protocol.AuditEntry{
		ID: strconv.FormatUint(seq, 10), Time: a.Time.UTC(), Operation: protocol.AuditOperation(a.Operation),
		StreamPrefix: a.StreamPrefix, ConsumerGroup: a.ConsumerGroup, ReshardingID: a.ReshardingID,
		Requested: protocol.AuditRequested{
			InitialShardCount: a.InitialShardCount, TargetShardCount: a.TargetShardCount,
			Force: a.Force, DeleteKeys: a.DeleteKeys, DeprecatedAfter: a.DeprecatedAfter,
		},
		RequestedBy: a.RequestedBy, Reason: a.Reason,
		Principal: a.Principal, Roles: roles, AuthMethod: a.AuthMethod,
		RequestID: a.RequestID, ClientAddress: a.ClientAddress, UserAgent: a.UserAgent,
		Method: a.Method, Route: a.Route, DurationMs: float64(a.DurationNanos) / float64(time.Millisecond),
		BodySHA256: a.BodySHA256,
		Result:     protocol.AuditResult{Outcome: a.Outcome, Status: a.Status, ErrorCode: protocol.ErrorCode(a.ErrorCode)},
	}, nil
}

func decodeAuditValue(v []byte, seq uint64) AuditRecord {
	env, err := unframe(v, kindAudit)
	if err == nil && env.StoreRevision != seq {
		err = newErr(ErrCorrupt, "audit entry %d stored under sequence %d", env.StoreRevision, seq)
	}
	if err == nil {
		var e protocol.AuditEntry
		if e, err = decodeAudit(env.Payload, seq); err == nil {
			return AuditRecord{Seq: seq, Entry: e}
		}
	}
	return AuditRecord{Seq: seq, Err: opErr("audit entry "+strconv.FormatUint(seq, 10), err)}
}

// AppendAudit implements [Store.AppendAudit].
func (c *core) AppendAudit(ctx context.Context, entry protocol.AuditEntry) (seq uint64, err error) {
	payload, err := encodeAudit(entry)
	if err != nil {
		return 0, err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	// A fresh revision is unique within this process: no other writer here
	// can hold this key, so no stripe lock and no revision check are
	// needed. Replicas sharing an etcd store may pick the same sequence;
	// the engine refuses the later one (nothing written) after raising the
	// counter past it, and the entry is written again under a new one.
	for attempt := 0; ; attempt++ {
		seq = c.revision.Add(1)
		err := c.commit(ctx, putOp(auditKey(seq), frame(kindAudit, seq, payload)))
		if err == nil {
			return seq, nil
		}
		if _, refused := errors.AsType[*errRefused](err); !refused || attempt == 19 {
			return 0, opErr("audit entry", c.fail(err))
		}
		// The winner of this sequence goes on from the same etcd revision
		// as we do; skipping further ahead each time breaks the tie.
		c.observeRevision(seq + uint64(attempt) + 1)
	}
}

// ListAudit implements [Store.ListAudit].
func (c *core) ListAudit(ctx context.Context, q AuditQuery) (out []AuditRecord, err error) {
	if q.Limit < 1 {
		return nil, errors.New("persistence: ListAudit limit must be at least 1")
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	lo, hi := auditBounds()
	if q.Before > 0 {
		hi = auditKey(q.Before)
	}
	out = []AuditRecord{}
	err = c.kv.scanReverse(ctx, lo, hi, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		seq, ok := parseAuditKey(k)
		if !ok {
			return newErr(ErrCorrupt, "key %q in the audit space", k)
		}
		rec := decodeAuditValue(v, seq)
		if rec.Err != nil {
			c.noteAuditDamage(rec.Err)
		}
		if q.StreamPrefix != "" && (rec.Err != nil || rec.Entry.StreamPrefix != q.StreamPrefix) {
			return nil
		}
		out = append(out, rec)
		if len(out) >= q.Limit {
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		if errors.Is(err, ErrCorrupt) {
			c.noteAuditDamage(err)
		}
		return nil, opErr("list audit", err)
	}
	return out, nil
}

// AuditRetention bounds the audit log: entries older than MaxAge go, then
// the oldest until the rest holds at most MaxBytes of stored entries. A
// zero field does not bound.
type AuditRetention struct {
	MaxAge   time.Duration
	MaxBytes int64
}

// PruneAudit deletes the audit entries retention no longer keeps, oldest
// first, in commits within the engine's limits, and returns how many it
// deleted. Entries that do not decode count by size only. It is meant to
// run in the background, every few minutes: each run scans the audit log
// once.
func (c *core) PruneAudit(ctx context.Context, retention AuditRetention, now time.Time) (deleted int, err error) {
	if retention.MaxAge <= 0 && retention.MaxBytes <= 0 {
		return 0, nil
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	cutoff := now.Add(-retention.MaxAge)
	var kept int64
	var doomed [][]byte
	dropping := false
	lo, hi := auditBounds()
	// Newest first: what is kept is decided before what is dropped.
	err = c.kv.scanReverse(ctx, lo, hi, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		size := int64(len(k) + len(v))
		// Once one entry goes, every older one goes too: entries are
		// appended in time order, so the log stays a suffix.
		drop := dropping || retention.MaxBytes > 0 && kept+size > retention.MaxBytes
		if !drop && retention.MaxAge > 0 {
			seq, _ := parseAuditKey(k)
			switch rec := decodeAuditValue(v, seq); {
			case rec.Err != nil:
				c.noteAuditDamage(rec.Err)
			case rec.Entry.Time.Before(cutoff):
				drop = true
			}
		}
		if drop {
			doomed = append(doomed, bytes.Clone(k))
			dropping = true
			return nil
		}
		kept += size
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			c.noteAuditDamage(err)
		}
		return 0, opErr("prune audit", err)
	}
	limits := c.kv.limits()
	for len(doomed) > 0 {
		n := len(doomed)
		if limits.MaxOps > 0 {
			n = min(n, limits.MaxOps)
		}
		if limits.MaxBytes > 0 {
			n = min(n, max(1, limits.MaxBytes/64))
		}
		ops := make([]op, n)
		for i, k := range doomed[len(doomed)-n:] { // the oldest first
			ops[i] = delOp(k)
		}
		if err := c.commit(ctx, ops...); err != nil {
			return deleted, opErr("prune audit", c.fail(err))
		}
		doomed = doomed[:len(doomed)-n]
		deleted += n
	}
	return deleted, nil
}
