package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/redisops"
)

// keepBeating heartbeats m every 200 ms until the test ends, off the test
// goroutine (so it must not fail the test: a refused beat shows on the
// page instead).
func keepBeating(t *testing.T, s *coordtest.Server, m *coordtest.Member) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	url := s.URL + coordclient.HeartbeatPath(m.Prefix, m.Group, m.ID)
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			req := m.Request()
			raw, _ := json.Marshal(req)
			hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
			if err != nil {
				return
			}
			hr.Header.Set("Content-Type", "application/json")
			hr.Header.Set("Authorization", s.Authorization)
			if resp, err := http.DefaultClient.Do(hr); err == nil {
				var answer protocol.HeartbeatResponse
				if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&answer) == nil {
					m.Apply(req, answer)
				}
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// signIn opens the console in a browser context of the test's own as
// user and picks orders/orders once it shows shards rows.
func signIn(t *testing.T, s *coordtest.Server, user string, shards int) context.Context {
	t.Helper()
	ctx := headless(t, chromium(t), 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 1500)); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		what string
		do   chromedp.Action[chromedp.Void]
	}{
		{"open the page", chromedp.Navigate(s.URL + "/console")},
		{"see the sign-in form", chromedp.WaitVisible(chromedp.ID("username"))},
		{"type the user", chromedp.SendKeys(chromedp.ID("username"), user)},
		{"type the password", chromedp.SendKeys(chromedp.ID("password"), coordtest.Password(user))},
		{"sign in", chromedp.Click(chromedp.ID("signin-button"))},
		{"see the group", chromedp.WaitVisible(chromedp.CSS(`#groups tbody tr[data-key="orders/orders"]`))},
		{"pick the group", pickGroup("orders/orders", shards)},
	} {
		if err := chromedp.Do(ctx, step.do); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s as %s: %v\npage:\n%s", step.what, user, err, body)
		}
	}
	return ctx
}

// TestConsoleViewsAndRowActions drives one coordinator with Redis, a group
// of a live member and an expired one, and a 4 → 6 migration under way:
// signed in as admin the page draws the group's charts from the
// coordinator's history and a sparkline per shard, marks the expired
// member apart from the live one in class and words, browses entries
// across shards newest first and from an entry id, and rolls the
// migration back from the button on its own row (after the
// confirmation, audited), after which the added shards read draining.
// Signed in as a READ user the page has no write buttons; it shows the
// autoscale panel and health details of servers that send them, and
// judges each member state from a member row. The screenshot is kept in the test's directory, and with
// RSCOORD_CONSOLE_SCREENSHOT=FILE also there (docs/console.png is made
// that way).
func TestConsoleViewsAndRowActions(t *testing.T) {
	t.Parallel()
	chromium(t)
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Redis: redisops.Wrap(rdb),
		MetricsInterval: 500 * time.Millisecond,
		Group:           assign.Config{MemberLease: 3 * time.Second, HeartbeatInterval: 500 * time.Millisecond}})
	s.CreateStream("orders", 4)
	// Entries with ids of our choosing, interleaved across two shards.
	for _, e := range []struct{ key, id string }{{"orders:0", "1-1"}, {"orders:1", "2-1"}, {"orders:0", "3-1"}, {"orders:1", "4-1"}, {"orders:0", "5-1"}} {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.key, ID: e.id, Values: []any{"at", e.id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	live := coordtest.NewMember("pod-live-m0", "orders", "orders")
	gone := coordtest.NewMember("pod-gone-m0", "orders", "orders")
	coordtest.Converge(t, s, 6, live, gone)
	keepBeating(t, s, live) // gone is silent from here: its lease ends in 3 s
	var scaled protocol.ScaleResponse
	six := 6
	s.JSON(http.MethodPost, coordclient.StreamPath("orders")+"/scale",
		protocol.ScaleRequest{TargetShardCount: &six, RequestedBy: "test", Reason: "console test"}, http.StatusAccepted, &scaled)
	if len(scaled.Migrations) != 1 {
		t.Fatalf("scale answered %+v", scaled)
	}
	id := scaled.Migrations[0].ReshardingID

	admin := signIn(t, s, coordtest.UserAdmin, 6)
	run := func(what string, do chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(admin, do); err != nil {
			body, _ := chromedp.Run(admin, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", what, err, body)
		}
	}
	run("see a lag chart of at least two samples", pollTrue(`[...document.querySelectorAll("#charts figure:first-child polyline")].some((p) => +p.dataset.points >= 2)`))
	run("see a sparkline in the shards table", pollTrue(`document.querySelector("#assignment tbody tr td .spark polyline") !== null`))
	run("see the expired member marked", pollTrue(`(() => {
		const row = document.querySelector('#members tbody tr[data-member="pod-gone-m0"]');
		return row !== null && row.classList.contains("st-expired") && row.classList.contains("dead") &&
			/^(EXPIRED|PAST LEASE)/.test(row.cells[1].textContent);
	})()`))
	liveRow := eval[string](t, admin, `(() => { const r = document.querySelector('#members tbody tr[data-member="pod-live-m0"]'); return r.className + "|" + r.cells[1].textContent; })()`)
	if liveRow != "member st-active|ACTIVE" {
		t.Errorf("the live member's row reads %q, want class member st-active and state ACTIVE", liveRow)
	}
	migrationRow := `#migrations tbody tr[data-migration="` + id + `"]`
	run("see the migration's own buttons", pollTrue(`document.querySelectorAll('`+migrationRow+` button[data-action="rollback"], `+migrationRow+` button[data-action="complete"]').length === 2`))
	// A stream whose policy was never set reads as mode off.
	run("see the stream's autoscale mode", pollTrue(`!document.getElementById("autoscale").hidden && /^Mode off/.test(document.getElementById("autoscale-policy").textContent)`))

	// Every shard's entries, newest first, then from entry 3-1 down.
	run("ask for every shard", chromedp.Click(chromedp.ID("browse-all")))
	run("browse", chromedp.Click(chromedp.ID("browse-button")))
	ids := `[...document.querySelectorAll("#messages tbody tr")].map((r) => r.cells[0].textContent + "@" + r.cells[1].textContent).join(" ")`
	run("see the entries of both shards merged", pollTrue(ids+` === "5-1@0 4-1@1 3-1@0 2-1@1 1-1@0"`))
	run("type an entry id", chromedp.SendKeys(chromedp.ID("browse-from"), "3-1"))
	run("browse from it", chromedp.Click(chromedp.ID("browse-button")))
	run("see the entries from it down", pollTrue(ids+` === "3-1@0 2-1@1 1-1@0"`))

	screenshot(t, admin)

	run("ask to roll back on the migration's row", pollTrue(`(() => {
		const b = document.querySelector('`+migrationRow+` button[data-action="rollback"]');
		if (b) b.click();
		return !document.getElementById("confirm").hidden;
	})()`))
	run("type the reason", chromedp.SendKeys(chromedp.ID("confirm-reason"), "console row action"))
	run("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	run("see it done", pollTrue(`document.getElementById("action-result").textContent.startsWith("Done: rollback migration `+id+`")`))
	// The scale-out's added shards now drain: their rows say so.
	run("see shards 4 and 5 draining", pollTrue(`["4", "5"].every((i) => {
		const row = document.querySelector('#assignment tbody tr[data-shard="' + i + '"]');
		return row !== null && row.classList.contains("draining") && row.cells[8].textContent.startsWith("draining");
	})`))
	var m protocol.Migration
	s.JSON(http.MethodGet, coordclient.StreamPath("orders")+"/groups/orders/migrations/"+id, nil, http.StatusOK, &m)
	if m.State != protocol.MigrationRollingBack && m.State != protocol.MigrationRolledBack {
		t.Errorf("migration %s is %s after the console's rollback", id, m.State)
	}
	var audit protocol.AuditPage
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/audit?streamPrefix=orders", nil, http.StatusOK, &audit)
	if len(audit.Entries) == 0 || audit.Entries[0].Operation != protocol.AuditRollback || audit.Entries[0].Principal != coordtest.UserAdmin ||
		audit.Entries[0].Reason != "console row action" || audit.Entries[0].Result.Outcome != protocol.AuditAccepted {
		t.Errorf("audit of the console's rollback: %+v", audit.Entries)
	}

	// A READ user: the same rows, no write button anywhere.
	reader := signIn(t, s, coordtest.UserReader, 4)
	if err := chromedp.Do(reader, pollTrue(`document.querySelectorAll("#migrations tbody tr").length > 0`)); err != nil {
		t.Fatal(err)
	}
	if n := eval[int](t, reader, `[...document.querySelectorAll("button.write, .write-only button")].filter((b) => b.offsetParent !== null).length +
		document.querySelectorAll("#migrations button").length`); n != 0 {
		t.Errorf("a READ user sees %d write buttons", n)
	}

	// Servers with autoscaling answer its panel, and servers that send
	// health.redis as a string carry the object in redisDetail: the page
	// is given both by its fetch, rewritten.
	eval[bool](t, reader, `(() => {
		const real = window.fetch;
		window.fetch = async (url, opts) => {
			const u = String(url);
			if (u.endsWith("/streams/orders/autoscale")) return new Response(JSON.stringify({stream: "orders",
				policy: {mode: "dry-run", minShards: 2, maxShards: 8},
				lastDecision: {action: "SCALE_OUT", fromShards: 6, toShards: 8, reason: "lag above target", at: new Date().toISOString(), taken: false}}),
				{status: 200, headers: {"Content-Type": "application/json"}});
			if (u.endsWith("/monitoring/health")) {
				const h = await (await real(url, opts)).json();
				Object.assign(h, {redisDetail: {status: "UP", message: "from detail"}, redis: "UP", loopDetail: h.loop, loop: "UP"});
				return new Response(JSON.stringify(h), {status: 200, headers: {"Content-Type": "application/json"}});
			}
			return real(url, opts);
		};
		return true;
	})()`)
	if err := chromedp.Do(reader, pollTrue(`!document.getElementById("autoscale").hidden &&
		document.getElementById("autoscale-policy").textContent.startsWith("Mode dry-run") &&
		document.getElementById("autoscale-decision").textContent.startsWith("Last decision: SCALE_OUT 6 → 8 (lag above target)") &&
		document.getElementById("autoscale-decision").textContent.endsWith("not taken") &&
		document.getElementById("health").textContent.includes("Redis UP (from detail)")`)); err != nil {
		body, _ := chromedp.Run(reader, chromedp.OuterHTML(chromedp.ID("app")))
		t.Fatalf("autoscale panel and health detail: %v\n%s", err, body)
	}

	// Each member state in words and class, as the page judges it from a
	// member row: late from the heartbeat's age unless the server says.
	for _, tc := range []struct{ member, text, class string }{
		{`{state: "ACTIVE", lastHeartbeatAt: at(-10), memberLeaseExpiresAt: at(5), heartbeatIntervalMs: 1000}`, "ACTIVE · late", "member st-late"},
		{`{state: "ACTIVE", lastHeartbeatAt: at(-10), memberLeaseExpiresAt: at(5), late: false}`, "ACTIVE", "member st-active"},
		{`{state: "ACTIVE", lastHeartbeatAt: at(-1), memberLeaseExpiresAt: at(5), late: true}`, "ACTIVE · late", "member st-late"},
		{`{state: "ACTIVE", lastHeartbeatAt: at(-20), memberLeaseExpiresAt: at(-1)}`, "PAST LEASE (recorded ACTIVE)", "dead member st-expired"},
		{`{state: "LEAVING", lastHeartbeatAt: at(0), memberLeaseExpiresAt: at(5)}`, "LEAVING", "member st-leaving"},
		{`{state: "ACTIVE", lastHeartbeatAt: at(0), memberLeaseExpiresAt: at(5), revoking: [{shardIndex: 1}]}`, "ACTIVE · revoking", "member st-revoking"},
		{`{state: "FENCED", lastHeartbeatAt: at(-5), memberLeaseExpiresAt: null}`, "FENCED", "dead member st-fenced"},
		{`{state: "EXPIRED", lastHeartbeatAt: at(-30), memberLeaseExpiresAt: null}`, "EXPIRED", "dead member st-expired"},
	} {
		got := eval[string](t, reader, `(() => { const now = Date.now(); const at = (s) => new Date(now + s * 1000).toISOString();
			const st = memberStatus(`+tc.member+`, now); return st.text + "|" + st.cls; })()`)
		if want := tc.text + "|" + tc.class; got != want {
			t.Errorf("member %s shows %q, want %q", tc.member, got, want)
		}
	}
	if got := eval[string](t, reader, `clientOf({clientAddress: "10.0.0.7:5123", instanceId: "i-1", userAgent: "rscoord-member/1"})`); got != "10.0.0.7:5123 · i-1 · rscoord-member/1" {
		t.Errorf("client of a member: %q", got)
	}
}

// screenshot keeps a picture of the page in the test's directory (logged)
// and, with RSCOORD_CONSOLE_SCREENSHOT=FILE, in FILE.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(t.TempDir(), "console.png")}
	if p := os.Getenv("RSCOORD_CONSOLE_SCREENSHOT"); p != "" {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d KiB)", p, len(png)/1024)
	}
	if !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("the screenshot is no PNG: % x", png[:min(8, len(png))])
	}
}
