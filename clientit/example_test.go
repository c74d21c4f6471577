package clientit_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestOrdersExampleRuns builds the example application
// (client/examples/orders) and runs it as a user would: its producer
// publishes 60 orders, then its consumer (batch handler, hooks, retry in
// place) runs against the real coordinator and real Redis until it has
// counted all of them. The totals it wrote must add up.
func TestOrdersExampleRuns(t *testing.T) {
	t.Parallel() // each builds a binary of its own: the two builds overlap
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "orders")
	build := exec.Command(gobin, "build", "-o", bin, "./examples/orders")
	build.Dir = filepath.Join("..", "client")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example: %v\n%s", err, out)
	}

	srv := redistest.Standalone(t)
	rdb := srv.Client()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true})
	const stream, shards, orders = "orders", 4, 60
	coord.CreateStream(stream, shards)
	ctx := context.Background()
	if err := redistest.CreateShards(ctx, rdb, stream, shards, stream); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"-coordinator", coord.URL, "-redis", srv.Addr, "-stream", stream}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("orders %v: %v\n%s", args, err, out)
		}
		t.Logf("orders %v:\n%s", args, out)
	}
	run("-mode", "produce", "-n", strconv.Itoa(orders))
	run("-mode", "consume", "-expect", strconv.Itoa(orders))

	totals, err := rdb.HGetAll(ctx, stream+":totals").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Order i is customer c-(i%5) with quantity 1+i%3.
	want := map[string]int{}
	for i := range orders {
		want["c-"+strconv.Itoa(i%5)] += 1 + i%3
	}
	if totals["_orders"] != strconv.Itoa(orders) {
		t.Fatalf("orders counted %q, want %d (totals %v)", totals["_orders"], orders, totals)
	}
	for c, q := range want {
		if totals[c] != strconv.Itoa(q) {
			t.Errorf("customer %s total %q, want %d", c, totals[c], q)
		}
	}
}
