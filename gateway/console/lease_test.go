package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// pageRow is one row of a console table: its class and its cells' text.
type pageRow struct {
	Class string   `json:"cls"`
	Cells []string `json:"cells"`
}

// tableRows reads the body rows of the table with the given id.
func tableRows(t *testing.T, ctx context.Context, id string) []pageRow {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("#`+id+
		` tbody tr")].map((r) => ({cls: r.className, cells: [...r.cells].map((c) => c.textContent)})))`))
	if err != nil {
		t.Fatalf("read #%s: %v", id, err)
	}
	var rows []pageRow
	if err := json.Unmarshal([]byte(raw), &rows); err != nil {
		t.Fatalf("rows of #%s: %v", id, err)
	}
	return rows
}

// has reports whether the row carries class cls.
func (r *pageRow) has(cls string) bool { return slices.Contains(strings.Fields(r.Class), cls) }

// memberRow is the members-table row of id, or nil.
func memberRow(rows []pageRow, id string) *pageRow {
	for i := range rows {
		if len(rows[i].Cells) > 0 && rows[i].Cells[0] == id {
			return &rows[i]
		}
	}
	return nil
}

// openConsole starts headless Chromium, signs in as the reader and picks
// orders/orders; the context ends with the test.
func openConsole(t *testing.T, s *coordtest.Server) context.Context {
	t.Helper()
	ctx := headless(t, chromium(t), 60*time.Second)
	group := chromedp.CSS(`#groups tbody tr[data-key="orders/orders"]`)
	for _, step := range []struct {
		what string
		do   chromedp.Action[chromedp.Void]
	}{
		{"open the page", chromedp.Navigate(s.URL + "/console")},
		{"see the sign-in form", chromedp.WaitVisible(chromedp.ID("username"))},
		{"type the user", chromedp.SendKeys(chromedp.ID("username"), coordtest.UserReader)},
		{"type the password", chromedp.SendKeys(chromedp.ID("password"), coordtest.Password(coordtest.UserReader))},
		{"sign in", chromedp.Click(chromedp.ID("signin-button"))},
		{"see the group", chromedp.WaitVisible(group)},
		{"pick the group and see four shards", pickGroup("orders/orders", 4)},
	} {
		if err := chromedp.Do(ctx, step.do); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", step.what, err, body)
		}
	}
	return ctx
}

// TestConsoleShowsExpiredMember stops one member's heartbeats while the
// other keeps beating: the console shows the silent member's lease as
// expired (and the member as EXPIRED once the coordinator recorded it, or
// PAST LEASE before), the live one with its lease left, and every shard's
// target moving to the live member.
func TestConsoleShowsExpiredMember(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{
		MemberLease: lease, HeartbeatInterval: 500 * time.Millisecond}})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("pod-a-m0", "orders", "orders")
	b := coordtest.NewMember("pod-b-m0", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	ctx := openConsole(t, s)

	// From here a is silent; b beats in this loop while the page is read.
	var members, assignment []pageRow
	if !poll.Wait(lease+20*time.Second, 300*time.Millisecond, func() bool {
		b.Beat(s)
		members, assignment = tableRows(t, ctx, "members"), tableRows(t, ctx, "assignment")
		ra, rb := memberRow(members, a.ID), memberRow(members, b.ID)
		aDead := ra != nil && len(ra.Cells) >= 7 && strings.HasPrefix(ra.Cells[6], "expired ") &&
			(ra.Cells[1] == string(protocol.MemberExpired) || strings.HasPrefix(ra.Cells[1], "PAST LEASE"))
		bLive := rb != nil && len(rb.Cells) >= 7 && strings.HasSuffix(rb.Cells[6], " left") && !rb.has("dead")
		allToB := len(assignment) == 4
		for _, r := range assignment {
			allToB = allToB && len(r.Cells) > 1 && r.Cells[1] == b.ID
		}
		return aDead && bLive && allToB
	}) {
		t.Fatalf("the console never showed %s expired and %s owning every shard:\nmembers %+v\nassignment %+v", a.ID, b.ID, members, assignment)
	}
}

// TestConsoleMarksActiveMemberPastLease: a member the coordinator still
// records as ACTIVE but whose lease has passed (a coordinator that stopped
// updating, or a clock that moved on: here the browser's clock is moved 20
// minutes ahead) is shown PAST LEASE, whatever its recorded state, with the
// row marked dead; the heartbeat age and each shard's ownerEpoch are
// shown as the coordinator reports them.
func TestConsoleMarksActiveMemberPastLease(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{MemberLease: 10 * time.Minute}})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("pod-a-m0", "orders", "orders")
	b := coordtest.NewMember("pod-b-m0", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	ctx := openConsole(t, s)

	// Before: both live, lease left in minutes.
	for _, m := range []*coordtest.Member{a, b} {
		r := memberRow(tableRows(t, ctx, "members"), m.ID)
		// Silent since they converged, they may read as late already.
		if r == nil || r.has("dead") || !strings.HasPrefix(r.Cells[1], string(protocol.MemberActive)) || !strings.HasSuffix(r.Cells[6], " min left") {
			t.Fatalf("%s before the clock moves: %+v", m.ID, r)
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`(() => { const real = Date.now; Date.now = () => real() + 20 * 60 * 1000; return true; })()`)); err != nil {
		t.Fatal(err)
	}
	want := "PAST LEASE (recorded " + string(protocol.MemberActive) + ")"
	var rows []pageRow
	if !poll.Wait(15*time.Second, 200*time.Millisecond, func() bool {
		rows = tableRows(t, ctx, "members")
		ok := true
		for _, m := range []*coordtest.Member{a, b} {
			r := memberRow(rows, m.ID)
			ok = ok && r != nil && r.has("dead") && r.Cells[1] == want &&
				strings.HasPrefix(r.Cells[6], "expired ") && strings.HasSuffix(r.Cells[5], " min ago")
		}
		return ok
	}) {
		t.Fatalf("members past their lease not shown as %q: %+v", want, rows)
	}
	// The coordinator still records them ACTIVE: the page did not just
	// repeat the recorded state.
	var ms protocol.MembersResponse
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &ms)
	for _, m := range ms.Members {
		if m.State != protocol.MemberActive {
			t.Fatalf("the coordinator records %s as %s: the test needs ACTIVE", m.MemberID, m.State)
		}
	}
	// ownerEpoch per shard, as the coordinator reports it.
	var as protocol.AssignmentsResponse
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/orders/groups/orders/assignments", nil, http.StatusOK, &as)
	rows = tableRows(t, ctx, "assignment")
	if len(as.OwnerEpochs) != 4 || len(rows) != 4 {
		t.Fatalf("ownerEpochs %+v, assignment rows %+v", as.OwnerEpochs, rows)
	}
	for _, sh := range as.OwnerEpochs {
		r := rows[sh.ShardIndex]
		if len(r.Cells) < 5 || r.Cells[0] != strconv.Itoa(sh.ShardIndex) || r.Cells[4] != strconv.FormatInt(sh.OwnerEpoch, 10) {
			t.Errorf("shard %d row %v, want ownerEpoch %d in its fifth cell", sh.ShardIndex, r.Cells, sh.OwnerEpoch)
		}
	}
}
