package ratelog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lines is a captured log: a text handler writing to a locked buffer.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestRepeatedWarningsOfOneCauseAreLoggedOncePerIntervalWithTheirCount(t *testing.T) {
	var out lines
	var clk clock
	l := New(slog.New(slog.NewTextHandler(&out, nil)), time.Minute, clk.now)
	for range 1500 {
		l.Warn("duplicate member id", "orders/g/m1", "member", "m1")
	}
	l.Warn("duplicate member id", "orders/g/m2", "member", "m2")
	clk.advance(time.Minute)
	l.Warn("duplicate member id", "orders/g/m1", "member", "m1")
	got := out.all()
	if len(got) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}
	if strings.Contains(got[0], "suppressed") || !strings.Contains(got[1], "member=m2") {
		t.Errorf("first lines %q, %q: want m1 without a count, then m2", got[0], got[1])
	}
	if !strings.Contains(got[2], "suppressed=1499") {
		t.Errorf("line after the interval %q, want suppressed=1499", got[2])
	}
}

func TestKeysPastTheBoundShareOneEntryPerMessage(t *testing.T) {
	var out lines
	var clk clock
	l := New(slog.New(slog.NewTextHandler(&out, nil)), time.Minute, clk.now)
	for i := range maxKeys + 1000 {
		l.Warn("refused", fmt.Sprint(i))
	}
	if n := len(out.all()); n != maxKeys+1 {
		t.Errorf("%d lines, want %d (one per key up to the bound, then one for the rest)", n, maxKeys+1)
	}
	l.mu.Lock()
	n := len(l.causes)
	l.mu.Unlock()
	if n > maxKeys+1 {
		t.Errorf("%d causes remembered, want at most %d", n, maxKeys+1)
	}
	// Once the remembered keys are quiet for an interval, new keys are
	// remembered again.
	clk.advance(time.Minute)
	l.Warn("refused", "new")
	if _, ok := l.causes["refused\x00new"]; !ok {
		t.Error("a new key after the interval shares the overflow entry")
	}
}

func TestConcurrentWarningsAreCountedOnce(t *testing.T) {
	var out lines
	var clk clock
	l := New(slog.New(slog.NewTextHandler(&out, nil)), time.Minute, clk.now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				l.Warn("member limit", "orders/g")
			}
		})
	}
	wg.Wait()
	clk.advance(time.Minute)
	l.Warn("member limit", "orders/g")
	got := out.all()
	if len(got) != 2 || !strings.Contains(got[1], "suppressed=1599") {
		t.Errorf("lines %q, want two, the second with suppressed=1599", got)
	}
}

func TestDisabledLevelIsNotCounted(t *testing.T) {
	var out lines
	l := New(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError})), time.Minute, nil)
	l.Warn("x", "k")
	if len(l.causes) != 0 || out.buf.Len() != 0 {
		t.Error("a warning below the handler's level was remembered or written")
	}
}

func TestLogAttrsHoldsBackLikeWarn(t *testing.T) {
	var out lines
	var clk clock
	l := New(slog.New(slog.NewTextHandler(&out, nil)), time.Minute, clk.now)
	for range 100 {
		l.LogAttrs(context.Background(), slog.LevelWarn, "audit", "10.0.0.1\x00401", slog.Int("status", 401))
	}
	clk.advance(time.Minute)
	l.LogAttrs(context.Background(), slog.LevelWarn, "audit", "10.0.0.1\x00401", slog.Int("status", 401))
	got := out.all()
	if len(got) != 2 || !strings.Contains(got[0], "status=401") || !strings.Contains(got[1], "suppressed=99") {
		t.Errorf("lines %q, want two, the second with suppressed=99", got)
	}
}
