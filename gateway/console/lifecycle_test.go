package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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

// TestConsoleResetsOffsetsAndDeletesStreams drives the lifecycle actions
// in headless Chromium against a coordinator with Redis. Signed in as a
// WRITE user: the members table names where each member runs and marks
// the silent one late in words; a reset of a group that a member reads
// shows its plan, and its execution is refused in plain words; a reset
// of a group nobody reads is a dry run first (Redis unchanged), then,
// confirmed, moves the group's last delivered id on the one shard asked
// for; a stream delete wants the stream's name typed, is refused in
// plain words while the stream has groups, and with force and delete
// keys removes the stream from the list and its keys from Redis. Signed
// in as a READ user the page has none of these buttons.
func TestConsoleResetsOffsetsAndDeletesStreams(t *testing.T) {
	t.Parallel()
	chromium(t)
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	// A long lease keeps the member live (and its shards held) while it
	// is silent; the short interval makes it late soon after.
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Redis: redisops.Wrap(rdb),
		Group: assign.Config{MemberLease: 10 * time.Minute, HeartbeatInterval: 200 * time.Millisecond}})
	s.CreateStream("orders", 2)
	s.CreateStream("old", 2)
	s.JSON(http.MethodPost, coordclient.StreamPath("orders")+"/groups/audit",
		protocol.CreateRequest{RequestedBy: "test"}, http.StatusCreated, nil)
	for _, e := range []struct{ key, id string }{{"orders:0", "1-1"}, {"orders:0", "2-1"}, {"orders:0", "3-1"}, {"orders:1", "4-1"}, {"old:0", "1-1"}, {"old:1", "1-1"}} {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.key, ID: e.id, Values: []any{"at", e.id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	m := coordtest.NewMember("pod-a-m0", "orders", "orders")
	m.InstanceID = "i-console-1"
	coordtest.Converge(t, s, 6, m)

	page := signIn(t, s, coordtest.UserWriter, 2)
	run := func(what string, do chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(page, do); err != nil {
			body, _ := chromedp.Run(page, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", what, err, body)
		}
	}
	text := func(id string) string {
		t.Helper()
		return eval[string](t, page, `document.getElementById("`+id+`").textContent`)
	}

	// Where the member runs, and late in words once it is silent.
	run("see the member's address, instance and agent, and late", pollTrue(`(() => {
		const row = document.querySelector('#members tbody tr[data-member="pod-a-m0"]');
		if (row === null) return false;
		const client = row.cells[7].textContent;
		return client.includes("127.0.0.1") && client.includes("i-console-1") && client.includes("Go-http-client") &&
			row.cells[1].textContent.includes("late") && row.classList.contains("st-late");
	})()`))

	// A group its member reads: the plan names the reader, the execution
	// is refused in plain words, and Redis is unchanged.
	run("pick latest", chromedp.SetValue(chromedp.ID("reset-to"), "LATEST"))
	run("ask for the dry run", chromedp.Click(chromedp.ID("reset-button")))
	run("see the plan with its reader", pollTrue(`!document.getElementById("reset-plan").hidden &&
		document.querySelector('#reset-shards tbody tr[data-shard="0"]')?.cells[4].textContent === "pod-a-m0"`))
	if got := text("reset-summary"); !strings.HasPrefix(got, "Dry run, nothing changed yet: group orders of orders to the latest entry on every shard. Members still read shards 0, 1") {
		t.Errorf("summary of the dry run: %q", got)
	}
	run("ask to execute", chromedp.Click(chromedp.ID("reset-execute")))
	run("see the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	run("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	run("see the refusal in plain words", pollTrue(`document.getElementById("action-result").textContent.startsWith(
		"Refused: live members still read these shards") && document.getElementById("action-result").textContent.includes("force (members hand off first)")`))
	checkLastDelivered(t, rdb, "orders:0", "orders", "0-0")

	// Forced: the member hands its shards off on its next heartbeats, the
	// reset lands on both shards, and the member is given them back.
	run("tick force", chromedp.Click(chromedp.ID("reset-force")))
	run("ask to execute with force", chromedp.Click(chromedp.ID("reset-execute")))
	run("see the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	run("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	beats := time.NewTicker(200 * time.Millisecond)
	defer beats.Stop()
	for deadline := time.Now().Add(30 * time.Second); !strings.HasPrefix(text("action-result"), "Done: "); <-beats.C {
		if time.Now().After(deadline) {
			t.Fatalf("the forced reset did not end: %q", text("action-result"))
		}
		m.Beat(s)
	}
	if got := text("action-result"); !strings.HasSuffix(got, "shards moved: 2 · handed off by pod-a-m0") {
		t.Errorf("the forced reset's result: %q", got)
	}
	checkLastDelivered(t, rdb, "orders:0", "orders", "3-1")
	checkLastDelivered(t, rdb, "orders:1", "orders", "4-1")
	coordtest.Converge(t, s, 6, m)
	if len(m.Owned) != 2 {
		t.Errorf("after the forced reset the member owns %v, want both shards", m.Owned)
	}
	run("untick force", chromedp.Click(chromedp.ID("reset-force")))

	// A group nobody reads: the dry run changes nothing, the execution
	// moves shard 0 only.
	run("pick the audit group", selectGroup("orders/audit"))
	run("see the plan discarded with the other group", pollTrue(`document.getElementById("reset-plan").hidden`))
	run("pick an entry id", chromedp.SetValue(chromedp.ID("reset-to"), "ID"))
	eval[bool](t, page, `document.getElementById("reset-to").dispatchEvent(new Event("change"))`)
	run("see the id field", chromedp.WaitVisible(chromedp.ID("reset-at")))
	run("type the id", chromedp.SendKeys(chromedp.ID("reset-at"), "2-1"))
	run("type the shard", chromedp.SendKeys(chromedp.ID("reset-shard"), "0"))
	run("ask for the dry run", chromedp.Click(chromedp.ID("reset-button")))
	planned := `[...document.querySelectorAll("#reset-shards tbody tr")].map((r) => [...r.cells].slice(0, 4).map((c) => c.textContent).join(" ")).join("|")`
	run("see the plan of shard 0", pollTrue(`!document.getElementById("reset-plan").hidden && `+planned+` === "0 orders:0 0-0 2-1"`))
	checkLastDelivered(t, rdb, "orders:0", "audit", "0-0")
	run("ask to execute", chromedp.Click(chromedp.ID("reset-execute")))
	run("see the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	run("type the reason", chromedp.SendKeys(chromedp.ID("confirm-reason"), "replay from 2-1"))
	run("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	run("see it done", pollTrue(`document.getElementById("action-result").textContent.startsWith(
		"Done: reset the offsets of group audit of orders to entry id 2-1 on shard 0 · shards moved: 1")`))
	if got := text("reset-summary"); !strings.HasPrefix(got, "Executed: ") {
		t.Errorf("summary after the execution: %q", got)
	}
	checkLastDelivered(t, rdb, "orders:0", "audit", "2-1")
	checkLastDelivered(t, rdb, "orders:1", "audit", "0-0")
	var audit protocol.AuditPage
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/audit?streamPrefix=orders", nil, http.StatusOK, &audit)
	if len(audit.Entries) == 0 || audit.Entries[0].Operation != protocol.AuditResetOffsets ||
		audit.Entries[0].Principal != coordtest.UserWriter || audit.Entries[0].Reason != "replay from 2-1" ||
		audit.Entries[0].Result.Outcome != protocol.AuditAccepted {
		t.Errorf("audit of the console's reset: %+v", audit.Entries)
	}

	// A time: what the page cannot read is said before anything is sent;
	// a time it can read goes out as RFC 3339 in UTC.
	run("pick a time", chromedp.SetValue(chromedp.ID("reset-to"), "TIME"))
	eval[bool](t, page, `document.getElementById("reset-to").dispatchEvent(new Event("change"))`)
	eval[bool](t, page, `(() => { document.getElementById("reset-at").value = ""; document.getElementById("reset-shard").value = ""; return true; })()`)
	run("type no time", chromedp.SendKeys(chromedp.ID("reset-at"), "soon"))
	run("ask for the dry run", chromedp.Click(chromedp.ID("reset-button")))
	run("see what is wrong", pollTrue(`document.getElementById("reset-error").textContent.startsWith("“soon” is not a time")`))
	eval[bool](t, page, `(() => { document.getElementById("reset-at").value = ""; return true; })()`)
	run("type a time", chromedp.SendKeys(chromedp.ID("reset-at"), "1970-01-01T00:00:00.002Z"))
	run("ask for the dry run", chromedp.Click(chromedp.ID("reset-button")))
	run("see the plan of every shard", pollTrue(`!document.getElementById("reset-plan").hidden && document.querySelectorAll("#reset-shards tbody tr").length === 2 &&
		document.getElementById("reset-summary").textContent === "Dry run, nothing changed yet: group audit of orders to time 1970-01-01T00:00:00.002Z on every shard."`))

	// A stream delete: the name typed, refused while groups exist, then
	// forced with its keys.
	run("pick the old stream", selectGroup("old/old"))
	askDelete := func() {
		t.Helper()
		run("ask to delete the stream", chromedp.Click(chromedp.ID("delete-stream-button")))
		run("see the typed confirmation, Confirm disabled", pollTrue(`!document.getElementById("confirm-typed-label").hidden &&
			document.getElementById("confirm-typed-name").textContent === "old" && document.getElementById("confirm-yes").disabled`))
		run("type part of the name", chromedp.SendKeys(chromedp.ID("confirm-typed"), "ol"))
		if !eval[bool](t, page, `document.getElementById("confirm-yes").disabled`) {
			t.Fatal("Confirm is enabled before the whole name is typed")
		}
		run("type the rest", chromedp.SendKeys(chromedp.ID("confirm-typed"), "d"))
		run("see Confirm enabled", pollTrue(`!document.getElementById("confirm-yes").disabled`))
		run("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	}
	askDelete()
	run("see the refusal in plain words", pollTrue(`document.getElementById("action-result").textContent.startsWith(
		"Refused: stream old still has consumer groups. Delete them first, or tick “force (deletes its groups first)”")`))
	run("tick force", chromedp.Click(chromedp.ID("delete-stream-force")))
	run("tick delete keys", chromedp.Click(chromedp.ID("delete-stream-keys")))
	askDelete()
	run("see it done", pollTrue(`document.getElementById("action-result").textContent.startsWith(
		"Done: delete stream old with its groups and its shard keys · groups deleted: old · keys deleted: 2")`))
	run("see the stream gone from the list", pollTrue(`document.querySelector('#groups tbody tr[data-key="old/old"]') === null &&
		document.querySelector('#groups tbody tr[data-key="orders/orders"]') !== null && document.getElementById("group").hidden`))
	if n, err := rdb.Exists(ctx, "old:0", "old:1").Result(); err != nil || n != 0 {
		t.Errorf("keys of the deleted stream: %d left (%v)", n, err)
	}
	if n, err := rdb.Exists(ctx, "orders:0").Result(); err != nil || n != 1 {
		t.Errorf("orders:0 exists %d (%v), want kept", n, err)
	}

	// A READ user: none of these actions.
	reader := signIn(t, s, coordtest.UserReader, 2)
	if n := eval[int](t, reader, `["reset-button", "reset-execute", "delete-stream-button", "delete-stream-force", "reset-force"]
		.map((id) => document.getElementById(id)).filter((b) => b.offsetParent !== null).length +
		[...document.querySelectorAll("button.write, .write-only button")].filter((b) => b.offsetParent !== null).length`); n != 0 {
		t.Errorf("a READ user sees %d write controls", n)
	}
}

// checkLastDelivered requires group's last delivered id on key to be want,
// as Redis says.
func checkLastDelivered(t *testing.T, rdb *redis.Client, key, group, want string) {
	t.Helper()
	groups, err := rdb.XInfoGroups(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("XINFO GROUPS %s: %v", key, err)
	}
	for _, g := range groups {
		if g.Name == group {
			if g.LastDeliveredID != want {
				t.Errorf("%s: group %s last delivered %s, want %s", key, group, g.LastDeliveredID, want)
			}
			return
		}
	}
	t.Errorf("%s: no group %s in %+v", key, group, groups)
}

// selectGroup clicks the group's row until the group view shows it (as
// pickGroup, a click on a row being replaced by a refresh is lost).
func selectGroup(key string) chromedp.Action[chromedp.Void] {
	title := strings.Replace(key, "/", " / ", 1)
	poll := chromedp.Poll[bool](fmt.Sprintf(`(() => {
		if (!document.getElementById("group").hidden && document.getElementById("group-title").textContent === %q) return true;
		const row = document.querySelector('#groups tbody tr[data-key=%q]');
		if (row && row.className !== "selected") row.click();
		return false;
	})()`, title, key), chromedp.WithPollingInterval(time.Second), chromedp.WithPollingTimeout(30*time.Second))
	return func(ctx context.Context, target *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, target)
		return chromedp.Void{}, err
	}
}
