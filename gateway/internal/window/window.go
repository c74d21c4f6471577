// Package window counts events per key in fixed time windows, for rate
// limits: admin mutations per principal and group, failed logins per
// username and per client address.
//
// A key's window opens at its first event and lasts Window; the count
// resets when it has passed. Memory is bounded: expired windows are swept
// once per Window, and a limiter holding MaxKeys live windows refuses new
// keys (fails closed) until some expire. A [Limiter] is safe for
// concurrent use and holds no package-level state.
package window

import (
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

// Blocked reports whether key has reached the limit in its current
// window, without counting an event, and how long until the window ends.
func (l *Limiter) Blocked(key string) (blocked bool, retryAfter time.Duration) {
	if l == nil || l.limit < 1 || l.window <= 0 {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s := l.keys[key]
	if s == nil || !now.Before(s.start.Add(l.window)) || s.count < l.limit {
		return false, 0
	}
	return true, s.start.Add(l.window).Sub(now)
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
		if !now.Before(s.start.Add(l.window)) {
			delete(l.keys, k)
		}
	}
	l.nextSweep = now.Add(l.window)
}
