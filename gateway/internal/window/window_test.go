package window

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestTake(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(2, time.Minute, 0, c.now)
	for i := range 2 {
		if ok, _ := l.Take("a"); !ok {
			t.Fatalf("event %d refused", i)
		}
	}
	c.t = c.t.Add(10 * time.Second)
	ok, retry := l.Take("a")
	if ok || retry != 50*time.Second {
		t.Fatalf("third event: ok=%v retry=%v, want refused with 50s", ok, retry)
	}
	if ok, _ := l.Take("b"); !ok {
		t.Fatal("another key was limited")
	}
	c.t = c.t.Add(50 * time.Second)
	if ok, _ := l.Take("a"); !ok {
		t.Fatal("new window refused")
	}
}

// TestReserveSequential: checks one after another count as Add counted
// failed ones: refused once the failures fill the limit, successes leave
// nothing behind.
func TestReserveSequential(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(3, time.Minute, 0, c.now)
	ctx := context.Background()
	for range 10 {
		r, err := l.Reserve(ctx, "u")
		if err != nil {
			t.Fatalf("a success before any failure: %v", err)
		}
		r.Release()
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("%d windows held after successes only, want 0", n)
	}
	for i := range 3 {
		r, err := l.Reserve(ctx, "u")
		if err != nil {
			t.Fatalf("failure %d refused: %v", i+1, err)
		}
		r.Commit()
		r.Release() // after Commit: does nothing
	}
	c.t = c.t.Add(10 * time.Second)
	var limited *LimitError
	if _, err := l.Reserve(ctx, "u"); !errors.As(err, &limited) || limited.RetryAfter != 50*time.Second {
		t.Fatalf("past the limit: %v, want a LimitError with 50s", err)
	}
	if _, err := l.Reserve(ctx, "other"); err != nil {
		t.Fatalf("another key: %v", err)
	}
	c.t = c.t.Add(50 * time.Second)
	if _, err := l.Reserve(ctx, "u"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// TestReserveConcurrent: checks running at once hold places, so no more of
// them run than the limit allows, whatever their number.
func TestReserveConcurrent(t *testing.T) {
	const limit, tries = 5, 200
	l := New(limit, time.Hour, 0, nil)
	var (
		ran     atomic.Int64
		limited atomic.Int64
		wg      sync.WaitGroup
	)
	for range tries {
		wg.Go(func() {
			r, err := l.Reserve(context.Background(), "u")
			var le *LimitError
			switch {
			case errors.As(err, &le):
				limited.Add(1)
				return
			case err != nil:
				t.Error(err)
				return
			}
			ran.Add(1)
			time.Sleep(time.Millisecond) // a password check
			r.Commit()
		})
	}
	wg.Wait()
	if ran.Load() != limit || limited.Load() != tries-limit {
		t.Fatalf("%d checks ran and %d were refused, want %d and %d", ran.Load(), limited.Load(), limit, tries-limit)
	}
}

// TestReserveWaitsForHeldPlaces: while held places fill the limit a
// reservation waits for one of them to end, and gets the place when that
// check succeeds; it gives up when its ctx ends.
func TestReserveWaitsForHeldPlaces(t *testing.T) {
	l := New(1, time.Hour, 0, nil)
	held, err := l.Reserve(context.Background(), "u")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Reserve(ctx, "u"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past its deadline: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := l.Reserve(context.Background(), "u")
		r.Release()
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("reserved while the place was held: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	held.Release()
	if err := <-got; err != nil {
		t.Fatalf("after the held check succeeded: %v", err)
	}
}

// TestReserveAcrossTheWindow: a place held when the window ends still
// counts in the next one, and a failure found then counts there.
func TestReserveAcrossTheWindow(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(1, time.Minute, 0, c.now)
	ctx := context.Background()
	r, err := l.Reserve(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Minute)
	l.Take("sweep") // a sweep must keep the held place
	r.Commit()
	if _, err := l.Reserve(ctx, "u"); err == nil {
		t.Fatal("the failure found after the window did not count")
	}
}

// TestReserveWhenFull: a full limiter lets new keys' checks through
// uncounted rather than lock every new client out.
func TestReserveWhenFull(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(1, time.Minute, 1, c.now)
	l.Add("a")
	for range 3 {
		r, err := l.Reserve(context.Background(), "new")
		if err != nil {
			t.Fatalf("a new key in a full limiter: %v", err)
		}
		r.Commit()
	}
	if n := l.Len(); n != 1 {
		t.Fatalf("%d windows held, want 1", n)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(1, time.Minute, 10, c.now)
	for i := range 10 {
		l.Take(fmt.Sprint(i))
	}
	if ok, retry := l.Take("new"); ok || retry != time.Minute {
		t.Fatalf("a key beyond the bound: ok=%v retry=%v, want refused", ok, retry)
	}
	c.t = c.t.Add(time.Minute)
	if ok, _ := l.Take("new"); !ok {
		t.Fatal("expired windows were not swept")
	}
	if n := l.Len(); n != 1 {
		t.Fatalf("%d windows held after the sweep, want 1", n)
	}
}

func TestDisabled(t *testing.T) {
	l := New(0, time.Minute, 0, nil)
	for range 100 {
		if ok, _ := l.Take("a"); !ok {
			t.Fatal("limit 0 refused")
		}
	}
	var nilLimiter *Limiter
	if ok, _ := nilLimiter.Take("a"); !ok {
		t.Fatal("nil limiter refused")
	}
}
