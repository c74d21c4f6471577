package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// startConverged serves orders (4 shards) with two converged members.
func startConverged(t *testing.T, opts coordtest.Options) *coordtest.Server {
	t.Helper()
	opts.Group = assign.Config{MemberLease: 10 * time.Minute}
	s := coordtest.Start(t, "", opts)
	s.CreateStream("orders", 4)
	a, b := coordtest.NewMember("pod-a-m0", "orders", "orders"), coordtest.NewMember("pod-b-m0", "orders", "orders")
	coordtest.Converge(t, s, 6, a, b)
	return s
}

// eval runs a JavaScript expression in the page and returns its value.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// countGroupsFetches makes the page count its calls of /monitoring/groups
// from now on, in window.groupsFetches.
const countGroupsFetches = `(() => {
	window.groupsFetches = 0;
	if (!window.realFetch) {
		window.realFetch = window.fetch;
		window.fetch = (...args) => {
			if (String(args[0]).includes("/monitoring/groups")) window.groupsFetches++;
			return window.realFetch(...args);
		};
	}
	return true;
})()`

// TestConsoleSessionExpiry: when its token expires the page says so on
// the sign-in form and stops calling the server; signed in again it
// refreshes once per period, not once per sign-in.
func TestConsoleSessionExpiry(t *testing.T) {
	t.Parallel()
	const ttl = 6 * time.Second
	s := startConverged(t, coordtest.Options{Auth: &coordtest.Auth{TokenTTL: ttl}})
	ctx := openConsole(t, s)
	eval[bool](t, ctx, countGroupsFetches)

	if err := chromedp.Do(ctx, pollTrue(`!document.getElementById("signin").hidden`)); err != nil {
		t.Fatalf("the sign-in form never came back after the token expired: %v", err)
	}
	if msg := eval[string](t, ctx, `document.getElementById("signin-error").textContent`); msg == "" {
		t.Error("the sign-in form does not say the session ended")
	}
	eval[bool](t, ctx, countGroupsFetches)
	// Two refresh periods and more: a refresh loop still running would
	// call the server in them. Checked all along, so a call fails at once.
	n := 0
	if !poll.Stays(5*time.Second, 100*time.Millisecond, func() bool { n = eval[int](t, ctx, `window.groupsFetches`); return n == 0 }) {
		t.Errorf("signed out, the page still called /monitoring/groups %d times in 5 s", n)
	}

	for _, step := range []struct {
		what string
		do   chromedp.Action[chromedp.Void]
	}{
		{"type the user", chromedp.SetValue(chromedp.ID("username"), coordtest.UserReader)},
		{"type the password", chromedp.SendKeys(chromedp.ID("password"), coordtest.Password(coordtest.UserReader))},
		{"sign in", chromedp.Click(chromedp.ID("signin-button"))},
		{"see the groups", chromedp.WaitVisible(chromedp.CSS(`#groups tbody tr[data-key="orders/orders"]`))},
	} {
		if err := chromedp.Do(ctx, step.do); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
	}
	eval[bool](t, ctx, countGroupsFetches)
	// For 4 s (less than the new token's ttl): one loop refreshes every
	// 2 s, so 2 calls, 3 at most with timing slack.
	if !poll.Stays(4*time.Second, 100*time.Millisecond, func() bool { n = eval[int](t, ctx, `window.groupsFetches`); return n <= 3 }) {
		t.Errorf("signed in again, the page called /monitoring/groups %d times in 4 s: more than one refresh loop runs", n)
	}
}

// TestConsoleSignOutRevokesTheToken: Sign out ends the session on the
// server too, not only in the page: the token it held is refused after.
func TestConsoleSignOutRevokesTheToken(t *testing.T) {
	t.Parallel()
	s := startConverged(t, coordtest.Options{Auth: &coordtest.Auth{}})
	ctx := openConsole(t, s)
	token := eval[string](t, ctx, `sessionStorage.getItem("rscoord.token")`)
	if token == "" {
		t.Fatal("the page holds no token after signing in")
	}
	bearer := s.As("Bearer " + token)
	if status, raw := bearer.Do(http.MethodGet, protocol.BasePath+"/monitoring/session", nil); status != http.StatusOK {
		t.Fatalf("the page's token before signing out: %d %s", status, raw)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("signout"))); err != nil {
		t.Fatal(err)
	}
	status := 0
	if !poll.Wait(10*time.Second, 100*time.Millisecond, func() bool {
		status, _ = bearer.Do(http.MethodGet, protocol.BasePath+"/monitoring/session", nil)
		return status == http.StatusUnauthorized
	}) {
		t.Fatalf("the token still works after Sign out: %d", status)
	}
	if !eval[bool](t, ctx, `!document.getElementById("signin").hidden && document.querySelectorAll("#groups tbody tr, #members tbody tr").length === 0`) {
		t.Error("after Sign out the page still shows the previous session's tables")
	}
}

// TestConsoleShowsServerUnreachable: when the coordinator stops answering,
// the health line turns to an error (it no longer says UP) and the tables
// are marked out of date.
func TestConsoleShowsServerUnreachable(t *testing.T) {
	t.Parallel()
	s := startConverged(t, coordtest.Options{Auth: &coordtest.Auth{}})
	ctx := openConsole(t, s)
	if err := chromedp.Do(ctx, pollTrue(`document.getElementById("health").className === "ok"`)); err != nil {
		t.Fatalf("health before the outage: %v", err)
	}
	s.Stop()
	if err := chromedp.Do(ctx, pollTrue(`document.getElementById("health").className === "error" && `+
		`!document.getElementById("health").textContent.includes("Coordinator UP") && `+
		`document.getElementById("app").classList.contains("stale")`)); err != nil {
		h := eval[string](t, ctx, `document.getElementById("health").className + ": " + document.getElementById("health").textContent + " / app " + document.getElementById("app").className`)
		t.Fatalf("the page never showed the coordinator unreachable: %v (health %s)", err, h)
	}
}

// TestConsoleShowsHungServer: a coordinator that accepts requests and
// never answers is shown as an error within the page's request timeout,
// not as the last answers it gave.
func TestConsoleShowsHungServer(t *testing.T) {
	t.Parallel()
	s := startConverged(t, coordtest.Options{Auth: &coordtest.Auth{}})
	proxy := etcdtest.NewProxy(t, strings.TrimPrefix(s.URL, "http://"))
	ctx := openConsole(t, coordtest.Remote(t, proxy.URL))
	if err := chromedp.Do(ctx, pollTrue(`document.getElementById("health").className === "ok"`)); err != nil {
		t.Fatalf("health before the stall: %v", err)
	}
	proxy.Pause()
	if err := chromedp.Do(ctx, pollTrue(`document.getElementById("health").className === "error" && `+
		`document.getElementById("health").textContent.includes("no answer within") && `+
		`document.getElementById("app").classList.contains("stale")`)); err != nil {
		h := eval[string](t, ctx, `document.getElementById("health").className + ": " + document.getElementById("health").textContent`)
		t.Fatalf("the page never showed the hung coordinator: %v (health %s)", err, h)
	}
}
