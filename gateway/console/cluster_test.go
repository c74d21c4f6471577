package console_test

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/proctest"
)

// xssReplicaID is a replica id that is HTML: the page must show it as
// text, never make it an element.
const xssReplicaID = `r2<img src=x onerror="document.title='pwned'">`

// TestConsoleShowsTheCluster drives the console of two real `rscoord
// serve --store etcd` replicas on a real 3-member etcd in headless
// Chromium, with authentication on (one users file and one token secret
// for both, as in production), signed in through the stand-by: the
// cluster section lists both replicas
// with their advertise URLs, liveness and roles, and the group with its
// owner, and the groups list shows the group the other replica runs; a
// replica id that is HTML stays text. When the owner is SIGKILLed the
// health line says the lists are incomplete, naming the dead replica and
// its stream, until its etcd lease lapses; then the page shows the other
// replica owning the group, the group listed again and the note gone.
func TestConsoleShowsTheCluster(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	etcd := etcdtest.NewCluster(t)
	creds := credtest.NewCluster(t)
	builder, err := proctest.NewBuilder()
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close()
	bin, err := builder.Build(t.Context(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	type replica struct {
		id, url string
		proc    *proctest.Process
	}
	start := func(id string) *replica {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		r := &replica{id: id, url: "http://" + addr}
		// An etcd lease of 8 s (the default is 2 s) keeps a dead replica
		// registered for several of the page's 2 s refreshes: the window
		// in which its part of every list is missing.
		args := append([]string{"serve", "--listen", addr,
			"--data-dir", t.TempDir(), "--log-format", "json", "--store", "etcd",
			"--etcd-lease-ttl", "8s", "--member-lease", "30s",
			"--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--advertise-url", r.url, "--replica-id", id},
			creds.ServerArgs()...)
		r.proc = proctest.Start(t, fmt.Sprintf("replica-%d", len(id)), bin, args, credtest.ServerEnv()...)
		if _, err := r.proc.WaitForLine(60*time.Second, func(l string) bool {
			return strings.Contains(l, `"rscoord listening"`) || strings.Contains(l, `"standing by"`)
		}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return r
	}
	r1 := start("r1") // the owner: the first to claim
	r2 := start(xssReplicaID)
	coordtest.Remote(t, r2.url).As(credtest.AdminAuth()).CreateStream("orders", 4)

	ctx := headless(t, browser, 90*time.Second)
	run := func(what string, do chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, do); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", what, err, body)
		}
	}
	ownerOfOrders := func(id string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#group-owners tbody tr")].some((tr) =>
			tr.cells[0].textContent === "orders" && tr.cells[1].textContent === "orders" && tr.cells[2].textContent === %q)`, id)
	}
	replicaRow := func(id, url, live, role string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#replicas tbody tr")].some((tr) =>
			tr.cells[0].textContent === %q && tr.cells[1].textContent === %q && tr.cells[2].textContent === %q && tr.cells[3].textContent === %q)`,
			id, url, live, role)
	}
	run("open the page through the stand-by", chromedp.Navigate(r2.url+"/console"))
	run("see the sign-in form", chromedp.WaitVisible(chromedp.ID("username")))
	run("type the user", chromedp.SendKeys(chromedp.ID("username"), credtest.AdminUser))
	run("type the password", chromedp.SendKeys(chromedp.ID("password"), credtest.AdminPassword))
	run("sign in", chromedp.Click(chromedp.ID("signin-button")))
	run("see the cluster section", chromedp.WaitVisible(chromedp.ID("cluster")))
	run("see r1 live and owning", pollTrue(replicaRow("r1", r1.url, "yes", "OWNER")))
	run("see r2 live and standing by", pollTrue(replicaRow(xssReplicaID, r2.url, "yes", "STANDBY")))
	run("see orders owned by r1", pollTrue(ownerOfOrders("r1")))
	// The stand-by runs no group, yet lists the whole cluster's.
	run("see the group orders listed through the stand-by", pollTrue(`[...document.querySelectorAll("#groups tbody tr")].some((tr) =>
		tr.cells[0].textContent === "orders" && tr.cells[1].textContent === "orders")`))
	injected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#cluster img") !== null || document.title === "pwned"`))
	if err != nil {
		t.Fatal(err)
	}
	if injected {
		t.Fatal("a replica id was put in the page as HTML")
	}
	// Every replica answered: the health line carries no note.
	run("see the health line whole", pollTrue(`document.querySelector("#health").className === "ok" &&
		document.querySelector("#health").textContent.startsWith("Coordinator UP") &&
		!document.querySelector("#health").textContent.includes("Incomplete")`))

	if err := r1.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r1.proc.Wait(10 * time.Second)
	// Until r1's lease lapses it is registered and holds orders: the
	// stand-by cannot reach it, so the lists lack its part and say so.
	run("see the lists marked incomplete, naming r1 and its stream", pollTrue(fmt.Sprintf(`(() => {
		const h = document.querySelector("#health");
		return h.className === "error" && h.textContent.startsWith("Coordinator DEGRADED") &&
			h.textContent.includes("Incomplete: replica r1 did not answer (no answer: ") &&
			h.textContent.includes("missing stream/orders") &&
			![...document.querySelectorAll("#groups tbody tr")].some((tr) => tr.cells[0].textContent === "orders") &&
			%s;
	})()`, replicaRow("r1", r1.url, "yes", "OWNER"))))
	run("see orders owned by the other replica", pollTrue(ownerOfOrders(xssReplicaID)))
	run("see it as the owner", pollTrue(replicaRow(xssReplicaID, r2.url, "yes", "OWNER")))
	run("see r1 gone", pollTrue(`![...document.querySelectorAll("#replicas tbody tr")].some((tr) => tr.cells[0].textContent === "r1")`))
	run("see the note gone and orders listed again", pollTrue(`document.querySelector("#health").className === "ok" &&
		document.querySelector("#health").textContent.startsWith("Coordinator UP") &&
		!document.querySelector("#health").textContent.includes("Incomplete") &&
		[...document.querySelectorAll("#groups tbody tr")].some((tr) => tr.cells[0].textContent === "orders")`))
	if err := r2.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r2.proc.Wait(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM of r2: %v", err)
	}
}
