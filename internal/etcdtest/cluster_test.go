package etcdtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/poll"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// put writes key=value with a bounded wait and returns the error.
func put(cli *clientv3.Client, key, value string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	_, err := cli.Put(ctx, key, value)
	return err
}

// get reads key linearizably (through the leader's quorum).
func get(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) != 1 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// eventuallyPut retries a put for up to 20 s: after a member is lost the
// client may first try a dead endpoint and an election may be running.
func eventuallyPut(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	var err error
	if !poll.Wait(20*time.Second, 100*time.Millisecond, func() bool { err = put(cli, key, value, 2*time.Second); return err == nil }) {
		t.Fatalf("put %s: %v", key, err)
	}
}

func TestClusterSurvivesOneMemberAndLosesQuorumWithTwo(t *testing.T) {
	c := etcdtest.NewCluster(t)
	if len(c.Members) != 3 {
		t.Fatalf("%d members, want 3", len(c.Members))
	}
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	eventuallyPut(t, cli, "k", "v0")

	// One member killed (the leader, the harder case): the others elect a
	// new leader and keep serving.
	ctx := context.Background()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if leader.Running() {
		t.Fatalf("%s still running after Kill", leader.Name)
	}
	eventuallyPut(t, cli, "k", "v1")
	if got := get(t, cli, "k"); got != "v1" {
		t.Fatalf("k = %q after one member died, want v1", got)
	}

	// A second member killed: no quorum, writes fail within their timeout.
	var second *etcdtest.Member
	for _, m := range c.Members {
		if m.Running() {
			second = m
			break
		}
	}
	if err := second.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := put(cli, "k", "lost", 3*time.Second); err == nil {
		t.Fatal("a put succeeded with 1 of 3 members running")
	}
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = c.WaitHealthy(hctx)
	cancel()
	if err == nil {
		t.Fatal("WaitHealthy succeeded with 1 of 3 members running")
	}

	// Quorum back: one member restarted rejoins from its log; the value
	// written before the loss is still there and writes work again.
	if err := second.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	hctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	// The put that timed out without quorum has an unknown outcome: the
	// lone member may have logged it, and raft commits it once quorum is
	// back. Either value is right; anything else is not.
	if got := get(t, cli, "k"); got != "v1" && got != "lost" {
		t.Fatalf("k = %q after quorum returned, want v1 or lost", got)
	}
	eventuallyPut(t, cli, "k", "v2")
	if err := leader.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	// The member that was down longest serves the latest value.
	only, err := c.ClientOf(leader.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, only, "k"); got != "v2" {
		t.Fatalf("k = %q from the restarted %s, want v2", got, leader.Name)
	}
}

func TestPausedMemberIsLikeALostOne(t *testing.T) {
	c := etcdtest.NewCluster(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	// A frozen leader keeps its sockets: its /health times out and the rest
	// elect a new leader and serve.
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = leader.Healthy(hctx)
	cancel()
	if err == nil {
		t.Fatalf("paused %s answered healthy", leader.Name)
	}
	eventuallyPut(t, cli, "p", "during-pause")
	if err := leader.Resume(); err != nil {
		t.Fatal(err)
	}
	hctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	only, err := c.ClientOf(leader.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, only, "p"); got != "during-pause" {
		t.Fatalf("p = %q from the resumed %s, want during-pause", got, leader.Name)
	}
	// Stop works on a paused member too (it is resumed to take SIGTERM).
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := leader.Stop(); err != nil {
		t.Fatal(err)
	}
	if leader.Running() || leader.Pid() != 0 {
		t.Fatalf("%s running after Stop", leader.Name)
	}
}

func TestStartClusterRefusesAMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := etcdtest.StartCluster(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "apt-get install etcd-server") {
		t.Fatalf("err = %v, want the install hint", err)
	}
}

// A proxy that holds replies only lets requests through: a put made while
// its answer is held is carried out, the caller that gave up learns
// nothing, and after Resume the client works again.
func TestProxyPauseRepliesLosesAnswersOnly(t *testing.T) {
	c := etcdtest.NewCluster(t)
	direct, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	target := strings.TrimPrefix(c.Members[0].ClientURL, "http://")
	proxy := etcdtest.NewProxy(t, target)
	cli, err := c.ClientOf(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	eventuallyPut(t, cli, "warm", "1")
	proxy.PauseReplies()
	if err := put(cli, "k", "lost answer", 300*time.Millisecond); err == nil {
		t.Fatal("a put answered while replies were held")
	}
	if !poll.Wait(5*time.Second, 20*time.Millisecond, func() bool { return get(t, direct, "k") == "lost answer" }) {
		proxy.Resume()
		t.Fatal("the put whose answer was held was not carried out while held")
	}
	proxy.Resume()
	eventuallyPut(t, cli, "k", "after")
	if got := get(t, direct, "k"); got != "after" {
		t.Fatalf("after Resume: %q", got)
	}
}
