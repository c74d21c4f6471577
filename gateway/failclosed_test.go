package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// corruptGroup flips one byte in the middle of a group's stored snapshot,
// through Pebble itself, as a bad disk or a bad copy would.
func corruptGroup(t *testing.T, dir, prefix, group string) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("g\x00" + prefix + "\x00" + group)
	val, closer, err := db.Get(key)
	if err != nil {
		t.Fatalf("the group's snapshot is not at the key this test expects: %v", err)
	}
	bad := append([]byte(nil), val...)
	closer.Close()
	bad[len(bad)/2] ^= 0x5a
	if err := db.Set(key, bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic("pebble fatal in test")
}

func TestCorruptGroupFailsClosedAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := coordtest.Start(t, dir, coordtest.Options{})
	s.CreateStream("orders", 4)
	s.JSON(http.MethodPost, base+"/streams/orders/groups/billing", `{"requestedBy":"ops"}`, http.StatusCreated, nil)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "billing")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 4, a)
	coordtest.Converge(t, s, 4, b)
	s.Stop()

	corruptGroup(t, dir, "orders", "orders")
	s = coordtest.Start(t, dir, coordtest.Options{AutoCreateGroups: true})

	// The damaged group: heartbeats RETRY (a keeps its shards), admin and
	// monitoring 503, and a join does not rebuild it.
	owned := a.Owned
	if resp := a.Beat(s); resp.Status != protocol.StatusRetry {
		t.Fatalf("heartbeat of a failed group: %s", resp.Status)
	}
	if len(a.Owned) != len(owned) {
		t.Fatalf("RETRY must not change ownership: %v → %v", owned, a.Owned)
	}
	if resp := coordtest.NewMember("c", "orders", "orders").Beat(s); resp.Status != protocol.StatusRetry {
		t.Fatalf("join into a failed group: %s", resp.Status)
	}
	for _, path := range []string{
		"/streams/orders/groups/orders",
		"/monitoring/streams/orders/groups/orders/members",
		"/monitoring/streams/orders/groups/orders/assignments",
		"/streams/orders/groups/orders/producer-routing",
	} {
		status, raw := s.Do(http.MethodGet, base+path, nil)
		if status != http.StatusServiceUnavailable {
			t.Fatalf("GET %s on a failed group: %d %s", path, status, raw)
		}
	}
	// The rest of the server works.
	if resp := b.Beat(s); resp.Status != protocol.StatusOK {
		t.Fatalf("healthy group's heartbeat: %s", resp.Status)
	}
	s.JSON(http.MethodGet, base+"/streams/orders/groups/billing", nil, http.StatusOK, nil)
	s.CreateStream("payments", 2)
	var h protocol.Health
	s.JSON(http.MethodGet, base+"/monitoring/health", nil, http.StatusOK, &h)
	if h.Status != protocol.HealthDegraded || h.Store.Status != protocol.HealthDegraded {
		t.Fatalf("health with a failed group = %+v", h)
	}
}

func TestShutdownRefusesMutationsAndRetriesHeartbeats(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	s.Coord.BeginShutdown()
	status, raw := s.Do(http.MethodPost, base+"/streams/other", `{"requestedBy":"ops"}`)
	if status != http.StatusServiceUnavailable || !contains(raw, protocol.CodeCoordinatorTerminating) {
		t.Fatalf("create during shutdown: %d %s", status, raw)
	}
	if resp := a.Beat(s); resp.Status != protocol.StatusRetry {
		t.Fatalf("heartbeat during shutdown: %s", resp.Status)
	}
	// Reads still answer while requests drain.
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders", nil, http.StatusOK, nil)
}

func contains(raw []byte, code protocol.ErrorCode) bool {
	return strings.Contains(string(raw), string(code))
}
