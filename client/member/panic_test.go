package member

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// errorLog is a slog handler that keeps ERROR records' messages and
// stack attributes.
type errorLog struct {
	mu     sync.Mutex
	stacks []string
}

func (l *errorLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *errorLog) WithGroup(string) slog.Handler            { return l }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelError {
		return nil
	}
	stack := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "stack" {
			stack = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.stacks = append(l.stacks, stack)
	l.mu.Unlock()
	return nil
}

var errPanicCause = errors.New("panic cause")

func panickingHandler(context.Context, *Message) error { panic(errPanicCause) }

// TestHandlerPanicKeepsItsStack: a handler panic reaches OnHandlerError as
// a *HandlerError whose Stack names the panicking function, wraps the
// panic's error, and is logged once at ERROR with the stack.
func TestHandlerPanicKeepsItsStack(t *testing.T) {
	tc := newTestCore(t, 1)
	log := &errorLog{}
	tc.log = slog.New(log)
	tc.cfg = &config{stream: "s", group: "g", retryAttempts: 1}
	var got []*HandlerError
	tc.hooks = &hooks{log: tc.log, h: Hooks{OnHandlerError: func(_ context.Context, e *HandlerError) { got = append(got, e) }}}
	tc.handler = panickingHandler
	run := newShardRun(tc.memberCore, 0, 0)
	run.deliver(batch(run, 1))
	tc.handle(run, run.take(1))
	if len(got) != 1 {
		t.Fatalf("%d OnHandlerError calls, want 1", len(got))
	}
	he := got[0]
	if !strings.Contains(string(he.Stack), "panickingHandler") {
		t.Fatalf("Stack does not name the panicking handler:\n%s", he.Stack)
	}
	if !errors.Is(he, errPanicCause) || he.Retry {
		t.Fatalf("HandlerError %v (retry %v), want one wrapping the panic's error, not retried", he, he.Retry)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.stacks) != 1 || !strings.Contains(log.stacks[0], "panickingHandler") {
		t.Fatalf("ERROR records with stacks %q, want one naming the handler", log.stacks)
	}
}
