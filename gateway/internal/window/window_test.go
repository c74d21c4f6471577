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
	// Every check holds its place until limit places are held at once, as
	// password checks running side by side do: the other tries meet a
	// full limit.
	allHeld := make(chan struct{})
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
			if ran.Add(1) == limit {
				close(allHeld)
			}
			<-allHeld
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
	// The window that failure opened expires like any other.
	c.t = c.t.Add(time.Minute)
	l.Take("sweep")
	if n := l.Len(); n != 1 {
		t.Fatalf("%d windows held a window later, want 1", n)
	}
}

// TestReleaseAfterTheWindow: a place given back after its window ended
// leaves nothing behind, counted failures of that window included.
func TestReleaseAfterTheWindow(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(3, time.Minute, 0, c.now)
	ctx := context.Background()
	l.Add("u")
	r, err := l.Reserve(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Minute)
	l.Take("sweep") // u's window expires while its place is held
	r.Release()
	if n := l.Len(); n != 1 {
		t.Fatalf("%d windows held, want 1 (the sweep's)", n)
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

// TestTakeOwnedBudget: an owner holding its budget of windows is refused
// new keys itself, until its oldest window ends; its held keys count on,
// and other owners open windows as usual.
func TestTakeOwnedBudget(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewPerOwner(2, time.Minute, 3, 0, c.now)
	for i := range 3 {
		if v := l.TakeOwned("flooder", fmt.Sprint(i)); !v.OK {
			t.Fatalf("key %d within the budget: %+v", i, v)
		}
		c.t = c.t.Add(10 * time.Second)
	}
	steps := []struct {
		name, owner, key string
		want             Verdict
	}{
		{"a key past the budget waits for the oldest window", "flooder", "3", Verdict{RetryAfter: 30 * time.Second, OverBudget: true}},
		{"a held key counts on", "flooder", "2", Verdict{OK: true}},
		{"a held key reaches its limit", "flooder", "2", Verdict{RetryAfter: 50 * time.Second}},
		{"another owner, same key", "other", "3", Verdict{OK: true}},
		{"another owner, new key", "other", "4", Verdict{OK: true}},
	}
	for _, st := range steps {
		if got := l.TakeOwned(st.owner, st.key); got != st.want {
			t.Errorf("%s: %+v, want %+v", st.name, got, st.want)
		}
	}
	c.t = c.t.Add(30 * time.Second) // key 0's window ends
	if v := l.TakeOwned("flooder", "3"); !v.OK {
		t.Fatalf("a new key once the oldest window ended: %+v", v)
	}
	if v := l.TakeOwned("flooder", "5"); v.OK || !v.OverBudget || v.RetryAfter != 10*time.Second {
		t.Fatalf("the budget is full again: %+v, want refused for 10s", v)
	}
}

// TestTakeOwnedFlood: one owner sending more distinct keys than the
// limiter holds fills only its budget; another owner is never refused,
// nor a new owner once the table is full (let through uncounted).
func TestTakeOwnedFlood(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	const perOwner, maxKeys = 1000, 3000
	l := NewPerOwner(1, time.Minute, perOwner, maxKeys, c.now)
	passed := 0
	for i := range 100_100 {
		if l.TakeOwned("flooder", fmt.Sprint(i)).OK {
			passed++
		}
	}
	if passed != perOwner || l.Len() != perOwner {
		t.Fatalf("%d keys passed, %d windows held; want %d and %d", passed, l.Len(), perOwner, perOwner)
	}
	// Two more owners at their budget fill the table.
	for _, o := range []string{"a", "b"} {
		for i := range perOwner {
			if v := l.TakeOwned(o, fmt.Sprint(i)); !v.OK {
				t.Fatalf("%s's key %d: %+v", o, i, v)
			}
		}
	}
	if n := l.Len(); n != maxKeys {
		t.Fatalf("%d windows held, want %d", n, maxKeys)
	}
	for range 3 {
		if v := l.TakeOwned("late", "k"); !v.OK {
			t.Fatalf("a new owner with the table full: %+v", v)
		}
	}
	if n := l.Len(); n != maxKeys {
		t.Fatalf("%d windows held past the bound %d", n, maxKeys)
	}
	if v := l.TakeOwned("a", "0"); v.OK || v.OverBudget {
		t.Fatalf("a held key past its limit with the table full: %+v, want refused", v)
	}
}

// TestSweepInOpeningOrder: windows are forgotten as they expire, in the
// order they opened, whoever holds them; a key whose window expired opens
// a new one at the back of that order.
func TestSweepInOpeningOrder(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewPerOwner(5, time.Minute, 10, 0, c.now)
	for i := range 6 {
		l.TakeOwned("o", fmt.Sprint(i)) // one every 10s: 0s … 50s
		c.t = c.t.Add(10 * time.Second)
	}
	// 60s: key 0 expired; key 1 is live and counts a second event.
	if v := l.TakeOwned("o", "1"); !v.OK {
		t.Fatalf("key 1 at 60s: %+v", v)
	}
	if n := l.Len(); n != 5 {
		t.Fatalf("%d windows at 60s, want 5", n)
	}
	c.t = c.t.Add(25 * time.Second) // 85s: keys 1 and 2 expired
	l.Take("sweep")
	if n := l.Len(); n != 4 { // 3, 4, 5 and "sweep"
		t.Fatalf("%d windows at 85s, want 4", n)
	}
	l.TakeOwned("o", "1") // a new window at 85s
	c.t = c.t.Add(60 * time.Second)
	l.Take("sweep")
	if n := l.Len(); n != 1 { // the new "sweep" window only
		t.Fatalf("%d windows at 145s, want 1", n)
	}
}

// TestOwnerForgotten: an owner whose windows all expired is forgotten, so
// that owners cost no memory past their windows.
func TestOwnerForgotten(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewPerOwner(1, time.Minute, 2, 0, c.now)
	for i := range 1000 {
		l.TakeOwned(fmt.Sprint("owner", i), "k")
	}
	c.t = c.t.Add(time.Minute)
	l.TakeOwned("last", "k")
	l.mu.Lock()
	owners := len(l.owners)
	l.mu.Unlock()
	if owners != 1 || l.Len() != 1 {
		t.Fatalf("%d owners and %d windows held, want 1 and 1", owners, l.Len())
	}
}
