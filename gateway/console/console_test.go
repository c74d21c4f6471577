package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/redisops"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	code := m.Run()
	// The shared browser must be gone before goroutines are counted.
	shared.stop()
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// shared is the package's one headless Chromium, started by the first
// test that needs a browser and stopped by TestMain: starting a browser
// per test cost seconds each. Every test gets a browser context of its
// own in it (as an incognito window: its own storage, cookies and tab).
var shared browser

type browser struct {
	once   sync.Once
	ctx    context.Context // the browser's first tab; its children are tests' contexts
	err    error
	cancel []context.CancelFunc
	dir    string
}

// start runs Chromium at path headless (its own profile directory,
// nothing fetched in the background), once.
func (b *browser) start(path string) (context.Context, error) {
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "rscoord-console-test-")
		if b.err != nil {
			return
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(filepath.Join(b.dir, "profile")),
			// Chromium keeps its singleton socket in a directory of its
			// own under TMPDIR, which outlives a browser that is killed
			// rather than closed: keep it in ours so none is left.
			chromedp.Env("TMPDIR="+b.dir),
			chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		)
		ctx, cancelBrowser := chromedp.NewContext(alloc)
		b.cancel = []context.CancelFunc{cancelBrowser, cancelAlloc}
		// The first Run starts the browser, which lives as long as the
		// context that Run is given: that must be the browser's own, so
		// the bound on the start cancels it from outside.
		timer := time.AfterFunc(60*time.Second, cancelBrowser)
		b.err = chromedp.Do(ctx)
		timer.Stop()
		if b.err != nil {
			b.err = fmt.Errorf("start Chromium: %w", b.err)
			return
		}
		b.ctx = ctx
	})
	return b.ctx, b.err
}

// stop closes the browser, if it was started, and removes its files.
func (b *browser) stop() {
	for _, cancel := range b.cancel {
		cancel()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func TestServesTheEmbeddedPage(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	tests := []struct {
		path, contains, contentType string
	}{
		{"/console", `<form id="signin-form">`, "text/html"},
		{"/console/", `<script src="/console/app.js"`, "text/html"},
		{"/console/app.js", "textContent", "javascript"},
		{"/console/style.css", "table", "text/css"},
	}
	for _, tc := range tests {
		resp, err := http.Get(s.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tc.contains) ||
			!strings.Contains(resp.Header.Get("Content-Type"), tc.contentType) ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("GET %s: %d %q %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	// No page may frame the console (clickjacking), old browsers that
	// know only X-Frame-Options included; the sign-in form posts nowhere
	// but here, no <base> can redirect its scripts, and no referrer
	// leaves with a link followed.
	resp, err := http.Get(s.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("X-Frame-Options %q, want DENY", got)
	}
	if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("Referrer-Policy %q, want no-referrer", got)
	}
	resp, err = http.Get(s.URL + "/console/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("missing file: %d", resp.StatusCode)
	}
}

// chromium finds the browser. In CI its absence is a failure; on a
// developer's machine without it the browser test is skipped.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium is not installed; .ci/run installs the Debian chromium package")
	}
	t.Skip("Chromium is not installed (apt-get install chromium); CI runs this test")
	return ""
}

// headless opens a browser context of the test's own in the shared
// browser at path (started by the first test) and returns its context,
// which ends after timeout or with the test (closing the context's tab).
func headless(t *testing.T, path string, timeout time.Duration) context.Context {
	t.Helper()
	root, err := shared.start(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	return ctx
}

// TestConsoleSignsInAndShowsAssignment drives the page in headless
// Chromium: sign in, pick the group, see each shard's target and current
// owner.
func TestConsoleSignsInAndShowsAssignment(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	// Members heartbeat only to converge; a long lease keeps them live
	// while the browser looks.
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{MemberLease: 10 * time.Minute}})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("pod-a-m0", "orders", "orders")
	b := coordtest.NewMember("pod-b-m0", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)

	ctx := headless(t, browser, 30*time.Second)

	group := chromedp.CSS(`#groups tbody tr[data-key="orders/orders"]`)
	steps := []struct {
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
	}
	for _, step := range steps {
		if err := chromedp.Do(ctx, step.do); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", step.what, err, body)
		}
	}
	text := func(id string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return v
	}
	who, assignment, members := text("who"), text("assignment"), text("members")
	if !strings.Contains(who, coordtest.UserReader) {
		t.Errorf("signed-in user shown as %q", who)
	}
	for _, m := range []*coordtest.Member{a, b} {
		if !strings.Contains(members, m.ID) {
			t.Errorf("members table lacks %s: %q", m.ID, members)
		}
	}
	// Every shard's row names its owner as both target and current.
	var as protocol.AssignmentsResponse
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/orders/groups/orders/assignments", nil, http.StatusOK, &as)
	rows := strings.Split(strings.TrimSpace(assignment), "\n")
	if len(rows) != 5 { // header + 4 shards
		t.Fatalf("assignment table has %d rows: %q", len(rows), assignment)
	}
	for member, shards := range as.TargetAssignment {
		for _, sh := range shards {
			row := rows[1+sh.ShardIndex]
			if strings.Count(row, member) != 2 {
				t.Errorf("shard %d row %q should name %s as target and current", sh.ShardIndex, row, member)
			}
		}
	}
}

// TestScriptRequestsGetNoBasicChallenge: a browser shows its own password
// dialog on a Basic challenge, so the console's requests (which say
// X-Requested-With) get a 401 without one; every other client gets it.
func TestScriptRequestsGetNoBasicChallenge(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	for _, script := range []bool{false, true} {
		req, err := http.NewRequest(http.MethodGet, s.URL+protocol.BasePath+"/monitoring/session", nil)
		if err != nil {
			t.Fatal(err)
		}
		if script {
			req.Header.Set("X-Requested-With", "rscoord-console")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		challenge := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || (challenge == "") != script {
			t.Fatalf("script=%v: %d with WWW-Authenticate %q", script, resp.StatusCode, challenge)
		}
	}
}

// TestConsoleLagHeartbeatAgeAndAction drives the console of a coordinator
// with Redis in headless Chromium as a WRITE user: each shard's lag comes
// from Redis, each member's last heartbeat and lease read as ages, and a
// stream created through the page (after its confirmation) exists and is
// audited under the user's name.
func TestConsoleLagHeartbeatAgeAndAction(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Redis: redisops.Wrap(rdb),
		Group: assign.Config{MemberLease: 10 * time.Minute}})
	s.CreateStream("orders", 4)
	for i := range 3 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"order", fmt.Sprint(i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	a := coordtest.NewMember("pod-a-m0", "orders", "orders")
	b := coordtest.NewMember("pod-b-m0", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)

	bctx := headless(t, browser, 60*time.Second)
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 1100)); err != nil {
		t.Fatal(err)
	}

	group := chromedp.CSS(`#groups tbody tr[data-key="orders/orders"]`)
	lagOfShard0 := `document.querySelector("#assignment tbody tr:nth-child(1) td:nth-child(8)")?.textContent === "3"`
	steps := []struct {
		what string
		do   chromedp.Action[chromedp.Void]
	}{
		{"open the page", chromedp.Navigate(s.URL + "/console")},
		{"see the sign-in form", chromedp.WaitVisible(chromedp.ID("username"))},
		{"type the user", chromedp.SendKeys(chromedp.ID("username"), coordtest.UserWriter)},
		{"type the password", chromedp.SendKeys(chromedp.ID("password"), coordtest.Password(coordtest.UserWriter))},
		{"sign in", chromedp.Click(chromedp.ID("signin-button"))},
		{"see the group", chromedp.WaitVisible(group)},
		{"pick the group and see four shards", pickGroup("orders/orders", 4)},
		{"see shard 0's lag of 3", pollTrue(lagOfShard0)},
		{"see the Redis health", pollTrue(`document.getElementById("health").textContent.includes("Redis UP")`)},
		{"browse shard 0", chromedp.Click(chromedp.ID("browse-button"))},
		{"see its three messages", chromedp.WaitVisible(chromedp.CSS(`#messages tbody tr:nth-child(3)`))},
	}
	run := func(what string, do chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, do); err != nil {
			body, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", what, err, body)
		}
	}
	for _, step := range steps {
		run(step.what, step.do)
	}
	members, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("members")))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*coordtest.Member{a, b} {
		row := lineWith(members, m.ID)
		if !strings.Contains(row, " s ago") || !strings.Contains(row, " min left") {
			t.Errorf("member row %q lacks its heartbeat age and lease left", row)
		}
	}
	// An action end to end: create a stream, confirm, see it done.
	for _, step := range []struct {
		what string
		do   chromedp.Action[chromedp.Void]
	}{
		{"type the prefix", chromedp.SendKeys(chromedp.ID("create-prefix"), "payments")},
		{"set the shards", chromedp.SetValue(chromedp.ID("create-shards"), "2")},
		{"type the reason", chromedp.SendKeys(chromedp.ID("create-reason"), "console test")},
		{"ask to create", chromedp.Click(chromedp.ID("create-button"))},
		{"see the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-yes"))},
		{"confirm", chromedp.Click(chromedp.ID("confirm-yes"))},
		{"see it done", pollTrue(`document.getElementById("action-result").textContent.startsWith("Done: create stream payments with 2 shards")`)},
	} {
		run(step.what, step.do)
	}
	var g protocol.GroupResponse
	s.JSON(http.MethodGet, protocol.BasePath+"/streams/payments/groups/payments", nil, http.StatusOK, &g)
	if g.ShardCount != 2 {
		t.Errorf("payments has %d shards, want 2", g.ShardCount)
	}
	var audit protocol.AuditPage
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/audit?streamPrefix=payments", nil, http.StatusOK, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Operation != protocol.AuditCreateStream ||
		audit.Entries[0].Principal != coordtest.UserWriter || audit.Entries[0].RequestedBy != coordtest.UserWriter ||
		audit.Entries[0].Reason != "console test" || audit.Entries[0].Result.Outcome != protocol.AuditAccepted {
		t.Errorf("audit of the console's create: %+v", audit.Entries)
	}
}

// pickGroup clicks the group's row until the page shows shards rows of
// its assignment. One click is not enough on a loaded machine: the
// groups table is drawn anew at every refresh, and a click that lands on
// a row being replaced selects nothing. It clicks only a row not shown
// selected, once a second, so that a refresh comes between two clicks.
func pickGroup(key string, shards int) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](fmt.Sprintf(`(() => {
		if (document.querySelectorAll("#assignment tbody tr").length >= %d) return true;
		const row = document.querySelector('#groups tbody tr[data-key=%q]');
		if (row && row.className !== "selected") row.click();
		return false;
	})()`, shards, key), chromedp.WithPollingInterval(time.Second), chromedp.WithPollingTimeout(30*time.Second))
	return func(ctx context.Context, target *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, target)
		return chromedp.Void{}, err
	}
}

// pollTrue waits until a JavaScript expression is true.
func pollTrue(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))
	return func(ctx context.Context, target *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, target)
		return chromedp.Void{}, err
	}
}

// lineWith is the first line of text containing s.
func lineWith(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
