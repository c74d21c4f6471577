package bench

import (
	"context"
	"io"
	"log"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// TestRunHeldTiny runs the held-heartbeat bench at a tiny size against a
// server with auth on: members heartbeat as a MEMBER, every one of them is
// parked at once, churn members join and leave, and the server's memory is
// read through its admin endpoints.
func TestRunHeldTiny(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{
		HeartbeatInterval: 400 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
	}})
	member := coordclient.Credentials{User: coordtest.UserMember, Password: coordtest.Password(coordtest.UserMember)}
	admin := coordclient.Credentials{User: coordtest.UserAdmin, Password: coordtest.Password(coordtest.UserAdmin)}
	adminClient, err := NewClient(s.URL, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer adminClient.CloseIdleConnections()
	rep, err := RunHeld(context.Background(), HeldConfig{
		Server: s.URL, Member: member, Admin: admin, Groups: 2, Members: 4, Shards: 8, Conns: 4,
		Duration: 1500 * time.Millisecond, Churn: 4, ChurnLife: 500 * time.Millisecond,
		Memory: func(ctx context.Context) (ServerMemory, error) { return ReadServerMemory(ctx, adminClient) },
		// The server runs in this process: its CPU is the test's.
		ServerCPU: ProcessCPU(os.Getpid()),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Members != 8 || rep.Interval != 400*time.Millisecond || rep.HeldAtOnce < 8 {
		t.Fatalf("members %d, interval %v, held at once %d: want 8, 400ms, 8", rep.Members, rep.Interval, rep.HeldAtOnce)
	}
	if rep.Joined == 0 || rep.Left != rep.Joined || rep.NotHeldCount < 2*rep.Joined || rep.NotHeld.Max <= 0 {
		t.Fatalf("churn: %d joined, %d left, %d answers not held (max %v)", rep.Joined, rep.Left, rep.NotHeldCount, rep.NotHeld.Max)
	}
	// Each member was held about an interval at a time (a little over 3
	// intervals were measured), and joins released some parked answers.
	if rep.HeldCount < 8 || rep.Early == 0 || rep.Errors != 0 || rep.NotOK != 0 {
		t.Fatalf("held %d, early %d, errors %d, not OK %d", rep.HeldCount, rep.Early, rep.Errors, rep.NotOK)
	}
	for name, m := range map[string]ServerMemory{"groups": rep.Groups, "idle": rep.Idle, "parked": rep.Parked} {
		if m.HeapAlloc == 0 || m.StackInuse == 0 || m.RSS == 0 {
			t.Errorf("%s: server memory not read: %+v", name, m)
		}
	}
	if rep.CPU.Server <= 0 || rep.CPU.Bench <= 0 || rep.CPU.Load != -1 || rep.CPU.Answered < rep.HeldCount+rep.NotHeldCount ||
		rep.CPU.ServerPerAnswer() <= 0 || rep.CPU.ServerCores(rep.Measured) <= 0 {
		t.Errorf("CPU %+v over %v, %d held and %d not held answers", rep.CPU, rep.Measured, rep.HeldCount, rep.NotHeldCount)
	}
	if rep.Parked.StackInuse <= rep.Idle.StackInuse {
		t.Errorf("parked connections cost no stack: idle %+v, parked %+v", rep.Idle, rep.Parked)
	}
}

// TestRunHeldTinyOverH2C: members sharing HTTP/2 connections, three to a
// connection, are all parked at once on at most four connections (theirs
// and the churn members').
func TestRunHeldTinyOverH2C(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{
		HeartbeatInterval: 400 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
	}})
	srv := gateway.NewHTTPServer(s.HTTP.Config.Handler, gateway.HTTPLimits{HTTP2: true}, log.New(io.Discard, "", 0), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		<-served
	}()
	url := "http://" + ln.Addr().String()
	member := coordclient.Credentials{User: coordtest.UserMember, Password: coordtest.Password(coordtest.UserMember)}
	admin := coordclient.Credentials{User: coordtest.UserAdmin, Password: coordtest.Password(coordtest.UserAdmin)}
	rep, err := RunHeld(context.Background(), HeldConfig{
		Server: url, Member: member, Admin: admin, Groups: 2, Members: 4, Shards: 8, Conns: 4,
		Duration: 1500 * time.Millisecond, Churn: 4, ChurnLife: 500 * time.Millisecond,
		H2C: true, MembersPerConn: 3,
		OpenFiles: func() (int, error) { return srv.OpenConnections(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.HeldAtOnce < 8 || rep.Connections > 4 || rep.Connections < 1 {
		t.Fatalf("held at once %d on %d connections: want 8 on at most 4", rep.HeldAtOnce, rep.Connections)
	}
	if rep.CPU.Server != -1 || rep.CPU.ServerPerAnswer() != -1 || rep.CPU.ServerCores(rep.Measured) != -1 {
		t.Errorf("server CPU known without a clock: %+v", rep.CPU)
	}
	if rep.Joined == 0 || rep.Left != rep.Joined || rep.HeldCount < 8 || rep.Errors != 0 || rep.NotOK != 0 {
		t.Fatalf("joined %d, left %d, held %d, errors %d, not OK %d", rep.Joined, rep.Left, rep.HeldCount, rep.Errors, rep.NotOK)
	}
}
