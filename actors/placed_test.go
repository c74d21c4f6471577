package actors

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// A placed coordinator (cluster mode) starts with no stream, runs a stream
// only once added, answers "moving, retry" once it is dropped (never "no
// such stream", which a member would take as final), and continues with
// the same epochs and the members' shards when it is added again — here
// or on another coordinator sharing the store.
func TestPlacedCoordinatorAddsAndDropsStreams(t *testing.T) {
	ctx := context.Background()
	store := pebbleStore(t)
	first := start(t, store)
	if _, err := first.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	resp := first.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	if resp.Status != protocol.StatusOK || len(resp.Assignment.AssignedShards) == 0 {
		t.Fatalf("join: %+v", resp)
	}
	before, err := first.Group(ctx, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.DropStream(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if got := first.Streams(); len(got) != 0 {
		t.Fatalf("streams after the drop: %v", got)
	}
	hb := first.Heartbeat(ctx, "orders", "orders", "a", steady("a", resp))
	if hb.Status != protocol.StatusRetry {
		t.Fatalf("heartbeat of a dropped stream: %+v", hb)
	}
	var perr *protocol.Error
	if _, err := first.Group(ctx, "orders", "orders"); !errors.As(err, &perr) || perr.Code != protocol.CodeStoreUnavailable {
		t.Fatalf("admin call on a dropped stream: %v", err)
	}
	if _, err := first.Scale(ctx, "orders", protocol.ScaleRequest{RequestedBy: "t"}); !errors.As(err, &perr) || perr.Code != protocol.CodeStoreUnavailable {
		t.Fatalf("scale of a dropped stream: %v", err)
	}

	second, err := Start(ctx, Config{Store: store, Placed: true, AutoCreateGroups: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := second.Close(cctx); err != nil {
			t.Error(err)
		}
	})
	if got := second.Streams(); len(got) != 0 {
		t.Fatalf("a placed coordinator started with streams: %v", got)
	}
	if _, err := second.Group(ctx, "orders", "orders"); !errors.As(err, &perr) || perr.Code != protocol.CodeStreamNotFound {
		t.Fatalf("a stream never added: %v", err)
	}
	for i := 0; i < 2; i++ { // adding twice loads once
		if err := second.AddStream(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
	}
	if err := second.AddStream(ctx, "unknown"); err != nil {
		t.Fatalf("adding a stream the store does not hold: %v", err)
	}
	if got := second.Streams(); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf("streams: %v", got)
	}
	hb = second.Heartbeat(ctx, "orders", "orders", "a", steady("a", resp))
	if hb.Status != protocol.StatusOK || !slices.Equal(hb.Assignment.AssignedShards, resp.Assignment.AssignedShards) {
		t.Fatalf("heartbeat after the move: %+v", hb)
	}
	after, err := second.Group(ctx, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if after.GroupEpoch < before.GroupEpoch || after.AssignmentEpoch < before.AssignmentEpoch || after.MetadataVersion < before.MetadataVersion {
		t.Fatalf("epochs went back: %+v → %+v", before, after)
	}
}
