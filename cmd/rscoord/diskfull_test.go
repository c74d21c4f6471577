package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/disktest"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestBinaryDiskFull runs `rscoord serve` on a small real tmpfs that fills
// up under it. While the disk is full no answer that needed a write is OK:
// heartbeats that change the group are answered RETRY (members keep what
// they read), admin mutations 503 STORE_UNAVAILABLE, /readyz 503, nothing
// hangs past the client's timeout and nothing answers 500; the log names
// the data directory and the cause. Once space is freed the coordinator
// recovers by itself: ready again, the refused join and leave go through,
// the members that held shards still hold them. A SIGTERM then stops it
// cleanly, and a restart on the same directory has every acknowledged
// member and epoch.
//
// The mount needs root; where it is refused the test is skipped, and
// persistence's errorfs tests cover the store's side everywhere.
//
// The disk fills at two points of Pebble's life. On its first write-ahead
// log, writes go into the space the log reserved until the memtable is
// full; the first commit into a new log then fails (ENOSPC on the log, a
// commit's error). After it flushed once, a full memtable moves to a
// recycled log whose space it holds, writes go on, and the flush to a
// table fails in the background (core.diskError), which must fail the
// store rather than let commits stall in Pebble's write stall.
func TestBinaryDiskFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		flushFirst bool
	}{{"first log", false}, {"recycled log", true}} {
		t.Run(tc.name, func(t *testing.T) { testBinaryDiskFull(t, tc.flushFirst) })
	}
}

func testBinaryDiskFull(t *testing.T, flushFirst bool) {
	mnt := disktest.Tmpfs(t, 64<<20)
	data := filepath.Join(mnt, "data")
	const shutdownTimeout = 10 * time.Second
	flags := []string{"--heartbeat-interval", "1s", "--member-lease", "30s",
		"--shutdown-timeout", shutdownTimeout.String()}
	p := startProcess(t, data, flags...)
	d := newDiskClient(t, p)

	// A healthy group: a, b and l read the 8 shards of orders/orders.
	d.createStream("orders", 8)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	l := coordtest.NewMember("l", "orders", "orders")
	d.converge(a, b, l)
	heldA, heldB := slices.Clone(a.Owned), slices.Clone(b.Owned)
	epochA, epochB := a.Epoch, b.Epoch
	// In bulk's big group every membership change is a large write.
	d.createStream("bulk", 1024)
	filler := "bulk"
	if flushFirst {
		// Pebble flushes once its full memtables add up to 4 MiB: joins
		// to a group of 50,000 shards write that in a few calls. Its first
		// log is then recycled for a later memtable.
		d.createStream("big", 50000)
		filler = "big"
		var big []*coordtest.Member
		for i := 0; !hasTable(t, data); i++ {
			if i == 40 {
				t.Fatalf("no table flushed after %d joins to big", i)
			}
			m := coordtest.NewMember(fmt.Sprintf("g%02d", i), "big", "big")
			if resp, err, _ := d.beat(m); err != nil || resp.Status != protocol.StatusOK {
				t.Fatalf("join of %s: %+v %v", m.ID, resp, err)
			}
			big = append(big, m)
		}
		// The flush's last steps (the manifest, the log's recycling) run
		// inside the server after the table appears, and nothing signals
		// their end: the test waits until the data directory has stayed
		// unchanged for 200 ms.
		poll.Until(t, 30*time.Second, func() bool {
			before := dirState(t, data)
			return poll.Stays(200*time.Millisecond, poll.Interval, func() bool { return dirState(t, data) == before })
		}, "the flush's last steps in "+data)
		t.Logf("a table flushed after %d joins to big", len(big))
	}

	// The disk fills up. Pebble reserved the space of its write-ahead log
	// before, so writes still succeed (durably) until its memtable is full
	// and it needs a new log or a table: with bulk's large writes, within
	// a few dozen joins. Those acknowledged must survive; the first join
	// refused is where the store failed.
	free := disktest.Fill(t, mnt, 0)
	var ackedFiller []*coordtest.Member
	failedAt := -1
	for i := range maxJoins {
		m := coordtest.NewMember(fmt.Sprintf("f%03d", i), filler, filler)
		resp, err, took := d.beat(m)
		if err == nil && resp.Status == protocol.StatusOK {
			ackedFiller = append(ackedFiller, m)
			continue
		}
		t.Logf("disk full: join %d of %s answered %s %v after %v", i, filler, resp.Status, err, took.Round(time.Millisecond))
		d.checkRefusedBeat("a join to "+filler, resp, err, took)
		failedAt = i
		break
	}
	if failedAt < 0 {
		t.Fatalf("%d joins acknowledged on a full disk: the store never met it\n%s", maxJoins, p.output())
	}
	t.Logf("disk full: %d joins acknowledged before the store failed", failedAt)

	// Not ready within a few seconds.
	d.awaitReady(false, 5*time.Second)
	// Changes that need a write: a join and a leave of orders.
	c := coordtest.NewMember("c", "orders", "orders")
	resp, err, took := d.beat(c)
	t.Logf("disk full: join of c answered %s %v after %v", resp.Status, err, took.Round(time.Millisecond))
	d.checkRefusedBeat("the join of c", resp, err, took)
	leaveReq := l.Request()
	leaveReq.MemberEpoch = protocol.EpochLeave
	resp, err, took = d.send(l, &leaveReq)
	t.Logf("disk full: leave of l answered %s %v after %v", resp.Status, err, took.Round(time.Millisecond))
	d.checkRefusedBeat("the leave of l", resp, err, took)
	// The members that read shards keep them: an answer is RETRY, or OK
	// with nothing changed (no write needed).
	for _, m := range []*coordtest.Member{a, b} {
		before, epoch := slices.Clone(m.Owned), m.Epoch
		resp, err, took := d.beat(m)
		t.Logf("disk full: heartbeat of %s answered %s %v after %v", m.ID, resp.Status, err, took.Round(time.Millisecond))
		d.checkNoHang(m.ID+"'s heartbeat", err, took)
		if err != nil {
			t.Errorf("disk full: heartbeat of %s: %v, want 200", m.ID, err)
		}
		if !slices.Equal(m.Owned, before) || m.Epoch != epoch {
			t.Errorf("disk full: %s went from %v at epoch %d to %v at %d (answer %+v)", m.ID, before, epoch, m.Owned, m.Epoch, resp)
		}
	}
	// Admin mutations are refused with STORE_UNAVAILABLE.
	_, err = d.cc.Do(d.ctx, http.MethodPost, coordclient.StreamPath("billing"),
		protocol.CreateRequest{InitialShardCount: new(2), RequestedBy: "test"}, nil)
	t.Logf("disk full: create stream billing: %v", err)
	d.checkStoreUnavailable("create stream billing", err)
	_, err = d.cc.Do(d.ctx, http.MethodPost, coordclient.GroupPath("orders", "audit"),
		protocol.CreateRequest{RequestedBy: "test"}, nil)
	t.Logf("disk full: create group orders/audit: %v", err)
	d.checkStoreUnavailable("create group orders/audit", err)
	// Still not ready, still serving.
	d.awaitReady(false, time.Second)
	if p.proc.Exited() {
		t.Fatalf("the server exited on the full disk:\n%s", p.output())
	}
	checkStoreFailedLogged(t, p.output(), data)
	checkNoServerErrors(t, p.output())

	// Space is freed: the coordinator recovers by itself.
	free()
	freedAt := time.Now()
	d.awaitReady(true, 15*time.Second)
	t.Logf("ready again %v after the space was freed", time.Since(freedAt).Round(time.Millisecond))
	// Heartbeats are answered again; the groups may still be reloading.
	for _, m := range []*coordtest.Member{a, b} {
		d.beatUntilOK(m, 10*time.Second)
	}
	if !slices.Equal(a.Owned, heldA) || !slices.Equal(b.Owned, heldB) || a.Epoch != epochA || b.Epoch != epochB {
		t.Fatalf("after recovery a holds %v at epoch %d, b %v at %d; before the disk filled %v at %d and %v at %d",
			a.Owned, a.Epoch, b.Owned, b.Epoch, heldA, epochA, heldB, epochB)
	}
	// The refused join and leave go through now: c gets shards.
	d.beatUntilOK(c, 10*time.Second)
	resp, err, _ = d.send(l, &leaveReq)
	if err != nil || resp.Status != protocol.StatusOK {
		t.Fatalf("the leave of l after recovery: %+v %v", resp, err)
	}
	d.converge(a, b, c)
	if len(c.Owned) == 0 {
		t.Fatalf("c got no shards after recovery: a %v b %v c %v", a.Owned, b.Owned, c.Owned)
	}
	for _, m := range ackedFiller {
		d.beatUntilOK(m, 5*time.Second)
	}
	var before protocol.GroupResponse
	d.get(coordclient.GroupPath("orders", "orders"), &before)
	fillerBefore := d.members(filler, filler)

	checkNoServerErrors(t, p.output())

	// SIGTERM: a clean stop within the shutdown timeout.
	stopAt := time.Now()
	if err := p.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The server bounds its shutdown by the timeout; the process exits
	// right after.
	if err := p.proc.Wait(shutdownTimeout + 2*time.Second); err != nil {
		t.Fatalf("SIGTERM after recovery: %v\n%s", err, p.output())
	}
	if !strings.Contains(p.output(), "rscoord stopped cleanly") {
		t.Fatalf("no clean stop logged:\n%s", p.output())
	}
	t.Logf("stopped %v after SIGTERM", time.Since(stopAt).Round(time.Millisecond))

	// A restart on the same directory has what was acknowledged.
	p = startProcess(t, data, flags...)
	d = newDiskClient(t, p)
	var after protocol.GroupResponse
	d.get(coordclient.GroupPath("orders", "orders"), &after)
	if after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch ||
		after.MetadataVersion != before.MetadataVersion {
		t.Fatalf("the restart changed orders/orders:\n before %+v\n after  %+v", before, after)
	}
	for _, m := range []*coordtest.Member{a, b, c} {
		owned, epoch := slices.Clone(m.Owned), m.Epoch
		resp, err, _ := d.beat(m)
		if err != nil || resp.Status != protocol.StatusOK || !slices.Equal(m.Owned, owned) || m.Epoch != epoch {
			t.Fatalf("%s after the restart: %+v %v; held %v at epoch %d, now %v at %d", m.ID, resp, err, owned, epoch, m.Owned, m.Epoch)
		}
	}
	if got := d.members(filler, filler); !maps.Equal(got, fillerBefore) {
		t.Fatalf("the restart changed %s's members:\n before %v\n after  %v", filler, fillerBefore, got)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("second SIGTERM: %v", err)
	}
}

// maxJoins bounds the joins sent to the full disk; Pebble's memtables
// grow from 256 KiB and fill with about 20 joins to bulk per 256 KiB.
const maxJoins = 120

// hasTable reports whether the Pebble directory holds a table.
// dirState names every file in dir with its size and modification time,
// so that two calls differ when anything in dir was written.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile: the next call differs anyway
		}
		fmt.Fprintf(&b, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String()
}

func hasTable(t *testing.T, dir string) bool {
	t.Helper()
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	return len(tables) > 0
}

// diskClient talks to one server through coordclient with a bearer token.
type diskClient struct {
	t   *testing.T
	ctx context.Context
	cc  *coordclient.Client
	// log is what the server printed so far, for failure messages.
	log func() string
}

// diskClientTimeout bounds every call: longer than the coordinator's own
// bound of a call to a group (its ask timeout, 10 s), so that a call the
// coordinator answers late is told from one it never answers.
const diskClientTimeout = 12 * time.Second

func newDiskClient(t *testing.T, p *process) *diskClient {
	t.Helper()
	url := p.url
	login, err := coordclient.New([]string{url}, coordclient.Options{Timeout: diskClientTimeout})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := login.Login(t.Context(), "admin", testAdminPassword)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := coordclient.New([]string{url}, coordclient.Options{Authorization: coordclient.BearerAuth(tok.AccessToken), Timeout: diskClientTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.CloseIdleConnections)
	t.Cleanup(login.CloseIdleConnections)
	return &diskClient{t: t, ctx: t.Context(), cc: cc, log: p.output}
}

func (d *diskClient) createStream(prefix string, shards int) {
	d.t.Helper()
	if _, err := d.cc.Do(d.ctx, http.MethodPost, coordclient.StreamPath(prefix),
		protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: "test"}, nil); err != nil {
		d.t.Fatalf("create stream %s: %v", prefix, err)
	}
}

func (d *diskClient) get(path string, out any) {
	d.t.Helper()
	if _, err := d.cc.Do(d.ctx, http.MethodGet, path, nil, out); err != nil {
		d.t.Fatalf("GET %s: %v", path, err)
	}
}

// members are the members of prefix/group by id, as "state epoch".
func (d *diskClient) members(prefix, group string) map[string]string {
	d.t.Helper()
	var resp protocol.MembersResponse
	d.get(coordclient.MonitoringGroupPath(prefix, group, "members"), &resp)
	out := map[string]string{}
	for _, m := range resp.Members {
		out[m.MemberID] = fmt.Sprintf("%s %d", m.State, m.MemberEpoch)
	}
	return out
}

// send posts req for m, applying the answer as m would, and says how long
// the call took.
func (d *diskClient) send(m *coordtest.Member, req *protocol.HeartbeatRequest) (protocol.HeartbeatResponse, error, time.Duration) {
	start := time.Now()
	resp, err := d.cc.Heartbeat(d.ctx, m.Prefix, m.Group, req)
	took := time.Since(start)
	if err == nil {
		m.Apply(*req, resp)
	}
	return resp, err, took
}

// beat sends m's next heartbeat.
func (d *diskClient) beat(m *coordtest.Member) (protocol.HeartbeatResponse, error, time.Duration) {
	req := m.Request()
	return d.send(m, &req)
}

// beatUntilOK heartbeats m until it is answered OK, at most within.
func (d *diskClient) beatUntilOK(m *coordtest.Member, within time.Duration) {
	d.t.Helper()
	var resp protocol.HeartbeatResponse
	var err error
	if !poll.Wait(within, 100*time.Millisecond, func() bool {
		resp, err, _ = d.beat(m)
		return err == nil && resp.Status == protocol.StatusOK
	}) {
		d.t.Fatalf("%s not answered OK within %v after recovery: %+v %v\nserver log:\n%s", m.ID, within, resp, err, d.log())
	}
}

// converge heartbeats the members until all are answered OK with nothing
// pending or revoking, checking after every answer that no shard is read
// by two of them.
func (d *diskClient) converge(members ...*coordtest.Member) {
	d.t.Helper()
	for range 20 {
		done := true
		for _, m := range members {
			reported := slices.Clone(m.Owned)
			resp, err, _ := d.beat(m)
			if err != nil {
				d.t.Fatalf("heartbeat of %s: %v", m.ID, err)
			}
			coordtest.CheckNoOverlap(d.t, members...)
			if resp.Status != protocol.StatusOK || len(resp.Assignment.PendingShards) > 0 || len(m.Revoking) > 0 ||
				!slices.Equal(reported, m.Owned) {
				done = false
			}
		}
		if done {
			return
		}
	}
	d.t.Fatalf("members did not converge in 20 rounds")
}

// awaitReady polls GET /readyz until it is 200 (ready) or not, at most
// within.
func (d *diskClient) awaitReady(ready bool, within time.Duration) {
	d.t.Helper()
	var err error
	if !poll.Wait(within, 50*time.Millisecond, func() bool {
		_, err = d.cc.Do(d.ctx, http.MethodGet, "/readyz", nil, nil)
		var ce *coordclient.Error
		switch {
		case ready && err == nil:
			return true
		case !ready && errors.As(err, &ce) && ce.StatusCode == http.StatusServiceUnavailable:
			return true
		case err != nil && !errors.As(err, &ce):
			d.t.Fatalf("GET /readyz: %v", err)
		}
		return false
	}) {
		d.t.Fatalf("/readyz not ready=%v within %v: %v\nserver log:\n%s", ready, within, err, d.log())
	}
}

// checkNoHang fails the test if a call was not answered in time.
func (d *diskClient) checkNoHang(what string, err error, took time.Duration) {
	d.t.Helper()
	if errors.Is(err, context.DeadlineExceeded) {
		d.t.Fatalf("disk full: %s got no answer within %v: %v\nserver log:\n%s", what, diskClientTimeout, err, d.log())
	}
}

// refuseWithin bounds the answer to a write refused on the full disk: the
// store refuses at once, and a group's ask timeout is 10 s, so a later
// answer means the write hung in the engine.
const refuseWithin = 5 * time.Second

// checkRefusedBeat checks the answer to a heartbeat that needed a write,
// sent while the disk is full: 200 RETRY, answered in time.
func (d *diskClient) checkRefusedBeat(what string, resp protocol.HeartbeatResponse, err error, took time.Duration) {
	d.t.Helper()
	d.checkNoHang(what, err, took)
	if took > refuseWithin {
		d.t.Errorf("disk full: %s answered after %v: the write hung in the engine instead of failing", what, took)
	}
	if err != nil {
		d.t.Fatalf("disk full: %s: %v, want a 200 RETRY\nserver log:\n%s", what, err, d.log())
	}
	if resp.Status != protocol.StatusRetry {
		d.t.Fatalf("disk full: %s answered %+v, want RETRY\nserver log:\n%s", what, resp, d.log())
	}
}

// checkStoreUnavailable checks the answer to an admin mutation sent while
// the disk is full: 503 STORE_UNAVAILABLE with Retry-After.
func (d *diskClient) checkStoreUnavailable(what string, err error) {
	d.t.Helper()
	var ce *coordclient.Error
	if !errors.As(err, &ce) {
		d.t.Fatalf("disk full: %s: %v, want 503 %s", what, err, protocol.CodeStoreUnavailable)
	}
	if ce.StatusCode != http.StatusServiceUnavailable || ce.Code() != protocol.CodeStoreUnavailable || ce.RetryAfter <= 0 {
		d.t.Fatalf("disk full: %s: %v, want 503 %s with Retry-After", what, ce, protocol.CodeStoreUnavailable)
	}
}

// checkStoreFailedLogged looks for the ERROR line of the failed store
// naming the data directory and the full disk, and for no stack trace.
func checkStoreFailedLogged(t *testing.T, output, dataDir string) {
	t.Helper()
	found := false
	for _, line := range strings.Split(output, "\n") {
		var rec struct {
			Level   string `json:"level"`
			Msg     string `json:"msg"`
			DataDir string `json:"dataDir"`
			Error   string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			if strings.HasPrefix(line, "goroutine ") || strings.HasPrefix(line, "panic:") {
				t.Errorf("the server printed a stack trace: %s", line)
			}
			continue
		}
		if rec.Level == "ERROR" && strings.HasPrefix(rec.Msg, "store failed") && rec.DataDir == dataDir &&
			strings.Contains(rec.Error, syscall.ENOSPC.Error()) {
			t.Logf("logged: %s: %s", rec.Msg, rec.Error)
			found = true
		}
	}
	if !found {
		t.Errorf("no ERROR line \"store failed\" naming dataDir %s and %q:\n%s", dataDir, syscall.ENOSPC.Error(), output)
	}
}

// checkNoServerErrors fails the test if the server answered a request
// with a 5xx other than 503 (a dependency, here the store, unavailable),
// or a handler failed or panicked.
func checkNoServerErrors(t *testing.T, output string) {
	t.Helper()
	for _, line := range strings.Split(output, "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			Path   string `json:"path"`
			Status int    `json:"status"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec.Msg == "http request" && rec.Status >= 500 && rec.Status != http.StatusServiceUnavailable:
			t.Errorf("the server answered %d to %s: %s", rec.Status, rec.Path, line)
		case rec.Msg == "handler panicked" || rec.Msg == "request failed" || strings.Contains(rec.Msg, "panicked"):
			t.Errorf("the server failed on a request: %s", line)
		}
	}
}
