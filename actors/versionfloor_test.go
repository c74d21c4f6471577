package actors

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/persistence"
)

// A create request's versionFloor starts what it creates above it, in
// every store and across a restart: the group's epochs and version, the
// stream's layout version. A member of another coordinator carrying
// numbers up to the floor is told to rejoin, not refused, and is then
// served above them.
func TestCreateStartsAboveTheVersionFloor(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name string
		// opener makes a function that opens the store on the same data
		// each time.
		opener func(t *testing.T) func() persistence.Store
	}{
		{"pebble", func(t *testing.T) func() persistence.Store {
			dir := t.TempDir()
			return func() persistence.Store {
				s, err := persistence.OpenPebble(dir, persistence.Options{Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
		{"etcd", func(t *testing.T) func() persistence.Store {
			cluster := etcdtest.NewCluster(t)
			return func() persistence.Store {
				cli, err := cluster.Client()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cli.Close() })
				s, err := persistence.OpenEtcd(context.Background(), persistence.EtcdOptions{Client: cli, Prefix: "/floor/", Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			open := tc.opener(t)
			store := open()
			c := startUnclosed(t, store)

			stream, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t", VersionFloor: 500})
			if err != nil {
				t.Fatal(err)
			}
			if stream.MetadataVersion <= 500 {
				t.Fatalf("stream layout version %d, want above 500", stream.MetadataVersion)
			}
			billing, err := c.CreateGroup(ctx, "orders", "billing", protocol.CreateRequest{RequestedBy: "t", VersionFloor: 900})
			if err != nil {
				t.Fatal(err)
			}
			checkAbove(t, "orders/billing", billing, 900)
			top, err := c.CreateGroup(ctx, "top", "top", protocol.CreateRequest{RequestedBy: "t", VersionFloor: protocol.MaxVersionFloor})
			if err != nil {
				t.Fatal(err)
			}
			checkAbove(t, "top/top", top, protocol.MaxVersionFloor)
			plain, err := c.CreateGroup(ctx, "orders", "plain", protocol.CreateRequest{RequestedBy: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if plain.MetadataVersion != 1 || plain.GroupEpoch != 0 {
				t.Fatalf("a group created without a floor: version %d, epoch %d; want 1, 0", plain.MetadataVersion, plain.GroupEpoch)
			}
			for _, floor := range []int64{-1, protocol.MaxVersionFloor + 1} {
				_, err := c.CreateGroup(ctx, "orders", "bad", protocol.CreateRequest{RequestedBy: "t", VersionFloor: floor})
				if perr := (*protocol.Error)(nil); !errors.As(err, &perr) || perr.Code != protocol.CodeInvalidRequest {
					t.Fatalf("versionFloor %d: %v, want INVALID_REQUEST", floor, err)
				}
			}

			// The other coordinator's member, with its epoch and version.
			ref := join("pod")
			ref.RequestID, ref.MemberEpoch, ref.MetadataVersion = "pod-ref", 800, 900
			ref.OwnedShards = []protocol.Shard{{ShardIndex: 0}}
			if resp := c.Heartbeat(ctx, "orders", "billing", "pod", ref); resp.Status != protocol.StatusUnknownMemberID {
				t.Fatalf("the other coordinator's member: %s %s, want UNKNOWN_MEMBER_ID", resp.Status, resp.Message)
			}
			joined := c.Heartbeat(ctx, "orders", "billing", "pod", join("pod"))
			if joined.Status != protocol.StatusOK || joined.MemberEpoch <= 900 || joined.MetadataVersion <= 900 {
				t.Fatalf("its rejoin: %s epoch %d version %d, want OK above 900", joined.Status, joined.MemberEpoch, joined.MetadataVersion)
			}
			if resp := c.Heartbeat(ctx, "orders", "billing", "pod", steady("pod", joined)); resp.Status != protocol.StatusOK {
				t.Fatalf("its next heartbeat: %s %s", resp.Status, resp.Message)
			}

			// Restarted on the same data, everything is still above.
			closeNow(t, c)
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			store = open()
			t.Cleanup(func() { _ = store.Close() })
			c = start(t, store)
			for _, g := range []struct {
				stream, group string
				floor         int64
			}{{"orders", "orders", 500}, {"orders", "billing", 900}, {"top", "top", protocol.MaxVersionFloor}} {
				got, err := c.Group(ctx, g.stream, g.group)
				if err != nil {
					t.Fatal(err)
				}
				checkAbove(t, g.stream+"/"+g.group+" after a restart", got, g.floor)
			}
			layout, err := askReply[streamLayout](ctx, c, c.env.dir.stream("orders"), &shardsMsg{})
			if err != nil || layout.metadataVersion <= 500 {
				t.Fatalf("stream layout version after a restart: %d %v, want above 500", layout.metadataVersion, err)
			}
		})
	}
}

func checkAbove(t *testing.T, what string, g protocol.GroupResponse, floor int64) {
	t.Helper()
	if g.GroupEpoch <= floor || g.AssignmentEpoch <= floor || g.MetadataVersion <= floor {
		t.Fatalf("%s: epochs %d/%d, version %d; want all above %d", what, g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion, floor)
	}
}

// startUnclosed starts a coordinator the test closes itself (closeNow).
func startUnclosed(t *testing.T, store persistence.Store) *Coordinator {
	t.Helper()
	c, err := Start(context.Background(), Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func closeNow(t *testing.T, c *Coordinator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
