// Package window counts events per key in fixed time windows, for rate
// limits: admin mutations per principal and group, failed logins per
// username and per client address.
//
// A key's window opens at its first event and lasts Window; the count
// resets when it has passed. Memory is bounded: expired windows are swept
// once per Window, and a limiter holding MaxKeys live windows opens no
// new one until some expire. What a key without a window gets then
// depends on the call: [Limiter.Take] refuses it (fails closed), while
// [Limiter.Reserve] and [Limiter.Add], the failed-login limits, let it
// through uncounted, so that whoever fills the table cannot lock every
// other client out of password checks. A [Limiter] is safe for
// concurrent use and holds no package-level state.
//
// Events whose outcome is known only later (a password check that may
// fail) take a [Reservation] first, so that checks running at once cannot
// together exceed the limit.
package window

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Limiter allows at most Limit events per key per window.
type Limiter struct {
	limit   int
	window  time.Duration
	maxKeys int
	now     func() time.Time

	mu        sync.Mutex
	keys      map[string]*slot
	nextSweep time.Time
}

type slot struct {
	start time.Time
	count int
	// pending is the reservations neither committed nor released; they
	// outlive the window they were taken in.
	pending int
	// wake, when not nil, is closed when a pending reservation ends, for
	// the reservations waiting for one.
	wake chan struct{}
}

// New returns a limiter of limit events per window per key, holding at
// most maxKeys windows at once (a default of 100 000 when maxKeys <= 0).
// now is the clock; nil means time.Now. A limit below 1 allows everything.
func New(limit int, window time.Duration, maxKeys int, now func() time.Time) *Limiter {
	if maxKeys <= 0 {
		maxKeys = 100_000
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{limit: limit, window: window, maxKeys: maxKeys, now: now, keys: map[string]*slot{}}
}

// Take counts one event of key. It reports whether the event is within
// the limit and, when it is not, how long until key's window ends.
// Refused events are not counted.
func (l *Limiter) Take(key string) (ok bool, retryAfter time.Duration) {
	if l == nil || l.limit < 1 || l.window <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s, retry, full := l.slot(key, now)
	if full {
		return false, retry
	}
	if s.count >= l.limit {
		return false, s.start.Add(l.window).Sub(now)
	}
	s.count++
	return true, 0
}

// Add counts one event of key without checking the limit (a failed
// login, say).
func (l *Limiter) Add(key string) {
	if l == nil || l.limit < 1 || l.window <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, _, full := l.slot(key, l.now()); !full {
		s.count++
	}
}

// LimitError is why [Limiter.Reserve] refused: key reached its limit.
type LimitError struct {
	// RetryAfter is how long until key's window ends.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("window: limit reached; retry after %v", e.RetryAfter)
}

// Reservation is an event of one key that may still count: it holds a
// place within the limit until [Reservation.Commit] counts it or
// [Reservation.Release] gives the place back. The zero Reservation holds
// nothing.
type Reservation struct {
	l   *Limiter
	key string
}

// Reserve holds a place for one event of key, to be counted or given back
// once its outcome is known. While the counted events and the held places
// fill the limit, it waits for a held place to end (or ctx); once the
// counted events alone fill it, it refuses with a [*LimitError]. Waiting
// rather than refusing keeps clients that send many good credentials at
// once from being refused for checks that all succeed.
//
// Unlike Take, a full limiter lets a new key through uncounted, as Add
// does: refusing would lock every new client out of password checks
// whenever someone fills the table.
func (l *Limiter) Reserve(ctx context.Context, key string) (Reservation, error) {
	if l == nil || l.limit < 1 || l.window <= 0 {
		return Reservation{}, nil
	}
	l.mu.Lock()
	for {
		now := l.now()
		s, _, full := l.slot(key, now)
		switch {
		case full:
			l.mu.Unlock()
			return Reservation{}, nil
		case s.count >= l.limit:
			retry := s.start.Add(l.window).Sub(now)
			l.mu.Unlock()
			return Reservation{}, &LimitError{RetryAfter: retry}
		case s.count+s.pending < l.limit:
			s.pending++
			l.mu.Unlock()
			return Reservation{l: l, key: key}, nil
		}
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		wake := s.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return Reservation{}, fmt.Errorf("window: wait for a place: %w", ctx.Err())
		}
		l.mu.Lock()
	}
}

// Commit counts the reserved event in key's current window. Commit and
// Release after the first of either do nothing.
func (r *Reservation) Commit() { r.end(true) }

// Release gives the reserved place back without counting the event.
func (r *Reservation) Release() { r.end(false) }

func (r *Reservation) end(count bool) {
	l := r.l
	if l == nil {
		return
	}
	r.l = nil
	l.mu.Lock()
	defer l.mu.Unlock()
	// slot carries pending places over into a new window, so key's slot
	// is there whatever the time.
	s := l.keys[r.key]
	s.pending--
	if count {
		if now := l.now(); !now.Before(s.start.Add(l.window)) {
			s.start, s.count = now, 0
		}
		s.count++
	}
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	l.dropIfIdle(r.key, s)
}

// dropIfIdle forgets key's window when it counts nothing and holds no
// place, so that checks that succeed leave no trace. The caller holds
// l.mu.
func (l *Limiter) dropIfIdle(key string, s *slot) {
	if s.count == 0 && s.pending == 0 {
		delete(l.keys, key)
	}
}

// Len is the number of windows held, for tests of the memory bound.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// slot returns key's live window, opening one when needed. full is true
// when no window can be opened: the limiter holds maxKeys live windows;
// retry is then one window. The caller holds l.mu.
func (l *Limiter) slot(key string, now time.Time) (s *slot, retry time.Duration, full bool) {
	l.sweep(now)
	s = l.keys[key]
	if s != nil && now.Before(s.start.Add(l.window)) {
		return s, 0, false
	}
	if s == nil && len(l.keys) >= l.maxKeys {
		return nil, l.window, true
	}
	if s != nil {
		// Places still held were taken in the old window; they go on
		// counting against the limit until they end.
		s.start, s.count = now, 0
		return s, 0, false
	}
	s = &slot{start: now}
	l.keys[key] = s
	return s, 0, false
}

// sweep drops expired windows, at most once per window length (or at once
// when the map is full). The caller holds l.mu.
func (l *Limiter) sweep(now time.Time) {
	if now.Before(l.nextSweep) && len(l.keys) < l.maxKeys {
		return
	}
	for k, s := range l.keys {
		if s.pending == 0 && !now.Before(s.start.Add(l.window)) {
			delete(l.keys, k)
		}
	}
	l.nextSweep = now.Add(l.window)
}
