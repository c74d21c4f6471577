package persistence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

func auditEntry(i int, prefix string) protocol.AuditEntry {
	n, force := i, i%2 == 0
	return protocol.AuditEntry{
		Time:          t0.Add(time.Duration(i) * time.Second),
		Operation:     protocol.AuditScale,
		StreamPrefix:  prefix,
		ConsumerGroup: "g",
		ReshardingID:  "rs-1",
		Requested:     protocol.AuditRequested{TargetShardCount: &n, Force: &force},
		RequestedBy:   "ops",
		Reason:        fmt.Sprintf("reason %d", i),
		Principal:     "alice",
		Roles:         []string{protocol.RoleWrite},
		AuthMethod:    "bearer",
		RequestID:     fmt.Sprintf("req-%d", i),
		ClientAddress: "127.0.0.1",
		UserAgent:     "test",
		Method:        "POST",
		Route:         "/coord/v1/streams/:prefix/scale",
		DurationMs:    1.5,
		BodySHA256:    "ab",
		Result:        protocol.AuditResult{Outcome: protocol.AuditRefused, Status: 409, ErrorCode: protocol.CodeActiveMigrationExists},
	}
}

func mustAppend(t *testing.T, s Store, e protocol.AuditEntry) uint64 {
	t.Helper()
	seq, err := s.AppendAudit(ctx, e)
	if err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	return seq
}

func mustList(t *testing.T, s Store, q AuditQuery) []AuditRecord {
	t.Helper()
	recs, err := s.ListAudit(ctx, q)
	if err != nil {
		t.Fatalf("ListAudit %+v: %v", q, err)
	}
	return recs
}

func testAuditRoundTrip(t *testing.T, e engine) {
	s := e.open(t)
	rev := mustSaveGroup(t, s, &assign.Group{StreamPrefix: "orders", Name: "g"}, 0)
	want := auditEntry(1, "orders")
	seq := mustAppend(t, s, want)
	if seq <= rev {
		t.Fatalf("audit sequence %d not above revision %d", seq, rev)
	}
	check := func(t *testing.T, s Store) {
		recs := mustList(t, s, AuditQuery{Limit: 10})
		if len(recs) != 1 || recs[0].Seq != seq || recs[0].Err != nil {
			t.Fatalf("records %+v", recs)
		}
		want.ID = strconv.FormatUint(seq, 10)
		assertEqual(t, "audit entry", recs[0].Entry, want)
	}
	check(t, s)
	s = e.reopen(t, s)
	check(t, s)
	// After a restart the counter continues above the newest audit entry.
	rev2, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "orders"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= seq {
		t.Fatalf("revision after restart %d not above audit sequence %d", rev2, seq)
	}
	if _, err := s.AppendAudit(ctx, protocol.AuditEntry{}); err == nil {
		t.Fatal("an entry without operation and time was stored")
	}
	if _, err := s.ListAudit(ctx, AuditQuery{}); err == nil {
		t.Fatal("ListAudit with limit 0 succeeded")
	}
}

func testAuditPaging(t *testing.T, e engine) {
	s := e.open(t)
	var seqs []uint64
	for i := range 7 {
		prefix := "orders"
		if i%3 == 0 {
			prefix = "payments"
		}
		seqs = append(seqs, mustAppend(t, s, auditEntry(i, prefix)))
		// Interleave other writes: sequences are revisions.
		mustSaveGroup(t, s, &assign.Group{StreamPrefix: "orders", Name: fmt.Sprintf("g%d", i)}, 0)
	}
	var got []uint64
	before := uint64(0)
	for page := 0; ; page++ {
		recs := mustList(t, s, AuditQuery{Before: before, Limit: 3})
		for _, r := range recs {
			got = append(got, r.Seq)
		}
		if len(recs) < 3 {
			break
		}
		before = recs[len(recs)-1].Seq
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	if len(got) != 7 {
		t.Fatalf("pages returned %v, want the 7 of %v", got, seqs)
	}
	for i := range got {
		if got[i] != seqs[len(seqs)-1-i] {
			t.Fatalf("pages returned %v, want %v newest first", got, seqs)
		}
	}
	recs := mustList(t, s, AuditQuery{StreamPrefix: "payments", Limit: 10})
	if len(recs) != 3 {
		t.Fatalf("payments entries: %d, want 3", len(recs))
	}
	for _, r := range recs {
		if r.Entry.StreamPrefix != "payments" {
			t.Fatalf("filter let %+v through", r.Entry)
		}
	}
	recs = mustList(t, s, AuditQuery{StreamPrefix: "payments", Before: recs[0].Seq, Limit: 1})
	if len(recs) != 1 || recs[0].Seq != seqs[3] {
		t.Fatalf("filtered page before the newest: %+v, want sequence %d", recs, seqs[3])
	}
}

func testAuditCorruptEntryListed(t *testing.T, e engine) {
	s := e.open(t)
	a := mustAppend(t, s, auditEntry(1, "orders"))
	b := mustAppend(t, s, auditEntry(2, "orders"))
	putRaw(t, s, auditKey(a), flip(getRaw(t, s, auditKey(a)), 10))
	// A valid entry of another sequence under b's key is corrupt too.
	payload, err := encodeAudit(auditEntry(2, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	putRaw(t, s, auditKey(b), frame(kindAudit, b+1000, payload))
	if degraded, reason := s.Health(); degraded {
		t.Fatalf("health before the damage was read: degraded (%s)", reason)
	}
	recs := mustList(t, s, AuditQuery{Limit: 10})
	if degraded, reason := s.Health(); !degraded || !strings.Contains(reason, "audit") {
		t.Fatalf("health after listing damaged audit entries: degraded %v (%q), want degraded naming the audit log", degraded, reason)
	}
	if len(recs) != 2 || !errors.Is(recs[0].Err, ErrCorrupt) || recs[0].Seq != b ||
		!errors.Is(recs[1].Err, ErrCorrupt) || recs[1].Seq != a {
		t.Fatalf("records %+v, want both entries listed with ErrCorrupt", recs)
	}
	if recs := mustList(t, s, AuditQuery{StreamPrefix: "orders", Limit: 10}); len(recs) != 0 {
		t.Fatalf("filtered list kept undecodable entries: %+v", recs)
	}
}
