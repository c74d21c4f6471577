package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/internal/proctest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestCreateStream runs the demo's calls against a real coordinator with
// authentication on: it waits for /healthz and creates the stream as the
// admin, and a wrong password comes back as the wire layer's 401.
func TestCreateStream(t *testing.T) {
	t.Parallel()
	hash, err := auth.HashPassword("demo-admin-pw", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	srv := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{
		Users: []auth.User{{Username: "admin", PasswordHash: hash, Roles: auth.Admin}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	coord, err := newClient(srv.URL, "demo-admin-pw")
	if err != nil {
		t.Fatal(err)
	}
	defer coord.CloseIdleConnections()
	if err := waitHealthy(ctx, coord, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := createStream(ctx, coord, "orders", 3); err != nil {
		t.Fatal(err)
	}
	var group protocol.GroupResponse
	if _, err := coord.Do(ctx, http.MethodGet, coordclient.GroupPath("orders", "orders"), nil, &group); err != nil {
		t.Fatalf("the demo's group: %v", err)
	}
	if group.ShardCount != 3 {
		t.Errorf("group has %d shards, want 3", group.ShardCount)
	}

	wrong, err := newClient(srv.URL, "not-the-password")
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.CloseIdleConnections()
	if err := createStream(ctx, wrong, "other", 1); !errors.Is(err, coordclient.ErrUnauthorized) {
		t.Errorf("create with a wrong password: %v, want a 401", err)
	}
}

// TestRefusesBusyListenAddress runs the demo with the built coordinator
// while another coordinator (authentication on) already answers on
// --listen: the demo says the address is taken and starts nothing, instead
// of taking the other server's 401 for its own failure.
func TestRefusesBusyListenAddress(t *testing.T) {
	t.Parallel()
	builder, err := proctest.NewBuilder()
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	hash, err := auth.HashPassword("someone-elses", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	other := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{
		Users: []auth.User{{Username: "admin", PasswordHash: hash, Roles: auth.Admin}},
	}})
	listen := strings.TrimPrefix(other.URL, "http://")
	rdb := redistest.Standalone(t)
	dir := filepath.Join(t.TempDir(), "demo")
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = run(ctx, CLI{Listen: listen, Redis: rdb.Addr, Dir: dir, Bin: filepath.Dir(bin),
		Stream: "orders", Shards: 1, Consumers: 1, Rate: 1}, &out)
	if err == nil || !strings.Contains(err.Error(), listen) || !strings.Contains(err.Error(), "already") {
		t.Fatalf("run with %s taken: %v, want an error saying it is taken\n%s", listen, err, out.String())
	}
	if strings.Contains(out.String(), "stopped") {
		t.Errorf("the demo started processes on a taken address:\n%s", out.String())
	}
}

// TestKeepsAForeignDirectory gives the demo a --dir that holds files it
// did not write: the demo refuses to empty it, and the files stay. A
// directory it made itself is emptied at the next start.
func TestKeepsAForeignDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	noBin := t.TempDir() // no binaries: a run that gets past the directory stops at rscoord
	rdb := redistest.Standalone(t)
	cli := CLI{Listen: freeAddr(t), Redis: rdb.Addr, Dir: dir, Bin: noBin, Stream: "orders", Shards: 1, Consumers: 1, Rate: 1}
	var out strings.Builder
	err := run(context.Background(), cli, &out)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), demoMarker) {
		t.Errorf("run on a foreign directory: %v, want a refusal naming it", err)
	}
	if _, statErr := os.Stat(keep); statErr != nil {
		t.Fatalf("the demo removed a file it did not write: %v", statErr)
	}

	own := filepath.Join(t.TempDir(), "demo")
	cli.Dir = own
	if err := run(context.Background(), cli, &out); err == nil || !strings.Contains(err.Error(), "start rscoord") {
		t.Fatalf("first run on a new directory: %v, want it to stop at starting rscoord", err)
	}
	old := filepath.Join(own, "old.log")
	if err := os.WriteFile(old, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), cli, &out); err == nil || !strings.Contains(err.Error(), "start rscoord") {
		t.Fatalf("second run on its own directory: %v, want it to stop at starting rscoord", err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo's own directory was not emptied: %v", err)
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestWaitGoesOnWhenAPodDies: a consumer pod that exits is told and the
// demo goes on (until --stop-after here); any other child that exits ends
// the demo with an error naming it.
func TestWaitGoesOnWhenAPodDies(t *testing.T) {
	exited := func(name string, pod bool) *child {
		c := &child{name: name, pod: pod, log: name + ".log", done: make(chan struct{}), err: errors.New("signal: killed")}
		close(c.done)
		return c
	}
	var out strings.Builder
	d := &demo{cli: CLI{StopAfter: 100 * time.Millisecond}, out: &out, started: []*child{exited("consumer-a", true)}}
	if err := d.wait(context.Background()); err != nil {
		t.Fatalf("wait after a pod died: %v", err)
	}
	if !strings.Contains(out.String(), "consumer-a exited (signal: killed") || !strings.Contains(out.String(), "The demo goes on") {
		t.Errorf("the pod's exit is not told:\n%s", out.String())
	}
	d = &demo{cli: CLI{StopAfter: time.Minute}, out: &out, started: []*child{exited("rscoord", false)}}
	if err := d.wait(context.Background()); err == nil || !strings.Contains(err.Error(), "rscoord exited on its own") {
		t.Errorf("wait after the coordinator died: %v, want an error naming it", err)
	}
}
