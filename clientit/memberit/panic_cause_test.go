package memberit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
)

// errPoison is what the handler of TestHandlerPanicKeepsItsError panics with.
var errPoison = errors.New("poison record")

// TestHandlerPanicKeepsItsError: a handler that panics with an error is
// reported to OnHandlerError with an error that wraps it, so the hook
// tells causes apart with errors.Is as for a returned error; a panic with
// any other value is reported with its text.
func TestHandlerPanicKeepsItsError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "panicwrap", 1)
	got := make(chan error, 2)
	e.start("rs-panicwrap", func(ctx context.Context, m *member.Message) error {
		if m.Fields["eventId"] == "p-0-0" {
			panic(fmt.Errorf("record %s: %w", m.ID, errPoison))
		}
		panic("not an error")
	}, member.WithHooks(member.Hooks{OnHandlerError: func(_ context.Context, he *member.HandlerError) { got <- he.Err }}))
	e.publish(0, 2, "p")
	for i := range 2 {
		var err error
		select {
		case err = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("OnHandlerError called %d times, want 2", i)
		}
		switch i {
		case 0:
			if !errors.Is(err, errPoison) {
				t.Fatalf("OnHandlerError got %v for a panic with an error wrapping errPoison; want it to wrap it too", err)
			}
		case 1:
			if err == nil || errors.Is(err, errPoison) || !strings.Contains(err.Error(), "not an error") {
				t.Fatalf("OnHandlerError got %v for a panic with a string", err)
			}
		}
	}
}
