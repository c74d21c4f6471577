package window

import (
	"fmt"
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

func TestBlockedAndAdd(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(3, time.Minute, 0, c.now)
	for range 3 {
		if b, _ := l.Blocked("u"); b {
			t.Fatal("blocked before the limit")
		}
		l.Add("u")
	}
	if b, retry := l.Blocked("u"); !b || retry != time.Minute {
		t.Fatalf("blocked=%v retry=%v after 3 failures", b, retry)
	}
	c.t = c.t.Add(time.Minute)
	if b, _ := l.Blocked("u"); b {
		t.Fatal("still blocked after the window")
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
