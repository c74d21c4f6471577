package console_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/internal/coordtest"
	"github.com/rscoord/rscoord/protocol"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

func TestServesTheEmbeddedPage(t *testing.T) {
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
	resp, err := http.Get(s.URL + "/console/nope.js")
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

// TestConsoleSignsInAndShowsAssignment drives the page in headless
// Chromium: sign in, pick the group, see each shard's target and current
// owner.
func TestConsoleSignsInAndShowsAssignment(t *testing.T) {
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

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 30*time.Second)
	defer cancelTimeout()

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
		{"pick the group", chromedp.Click(group)},
		{"see four shards", chromedp.WaitVisible(chromedp.CSS(`#assignment tbody tr:nth-child(4)`))},
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
