package actors_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/persistence"
)

// TestRecreatedGroupKeepsItsSeries: a group deleted and created again at
// once gets a new actor while the old one may still be stopping. The old
// actor's removal from the metrics, landing after the new actor's first
// state, must not take away the series the new one published: they would
// stay missing until the group's next change. The old actor's stop is
// held until the new actor has published, so that every round meets the
// race.
func TestRecreatedGroupKeepsItsSeries(t *testing.T) {
	ctx := context.Background()
	store, err := persistence.OpenPebble(t.TempDir(), persistence.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m := metrics.New()
	c, err := actors.Start(ctx, actors.Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(cctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	stopping, proceed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done) }) // before Close: stops at Close pass
	actors.SetStoppingHook(c, func(_, group string) {
		if group != "late" {
			return
		}
		select {
		case stopping <- struct{}{}:
			<-proceed
		case <-done:
		}
	})
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, "orders", "late", protocol.CreateRequest{RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		if _, err := c.DeleteGroup(ctx, "orders", "late", protocol.DeleteGroupRequest{RequestedBy: "test", Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateGroup(ctx, "orders", "late", protocol.CreateRequest{RequestedBy: "test"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return hasGroupState(t, m, "orders", "late") }, "the new actor's series")
		<-stopping // the old actor stops only now
		proceed <- struct{}{}
		// The old actor's removal would land at once; the series must
		// stay for the whole window after it.
		poll.Never(t, 200*time.Millisecond, func() bool { return !hasGroupState(t, m, "orders", "late") },
			fmt.Sprintf("round %d: once the old actor of a group deleted and created again stopped, %s lost the series of the group", round, metrics.GroupStateInfo))
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, 10*time.Second, cond, what)
}

// hasGroupState reports whether m exports rscoord_group_state for
// prefix/group.
func hasGroupState(t *testing.T, m *metrics.Metrics, prefix, group string) bool {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != metrics.GroupStateInfo {
			continue
		}
		for _, s := range f.GetMetric() {
			if label(s, "stream") == prefix && label(s, "group") == group {
				return true
			}
		}
	}
	return false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
