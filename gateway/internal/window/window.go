// Package window counts events per key in fixed time windows, for rate
// limits: admin mutations per principal and group, logouts per principal,
// failed logins per username and per client address.
//
// A key's window opens at its first event and lasts Window; the count
// resets when it has passed. Memory is bounded: a limiter holds at most
// MaxKeys windows, and forgets expired ones in the order they opened,
// so that every call costs O(1) amortized, however full the limiter.
// What a key without a window gets when the limiter is full depends on
// the call: [Limiter.Take] refuses it (fails closed), while
// [Limiter.Reserve] and [Limiter.Add], the failed-login limits, and
// [Limiter.TakeOwned] let it through uncounted, so that whoever fills the
// table cannot lock every other client out.
//
// Keys taken with [Limiter.TakeOwned] belong to an owner (a principal),
// and a limiter made by [NewPerOwner] holds at most PerOwner windows of
// each owner: an owner at its budget is refused new keys itself, so that
// no single owner can fill the table.
//
// Events whose outcome is known only later (a password check that may
// fail) take a [Reservation] first, so that checks running at once cannot
// together exceed the limit.
//
// A [Limiter] is safe for concurrent use and holds no package-level
// state.
package window

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxKeys is the bound on the windows a limiter holds when its
// constructor is given none.
const DefaultMaxKeys = 100_000

// Limiter allows at most Limit events per key per window.
type Limiter struct {
	limit    int
	window   time.Duration
	maxKeys  int
	perOwner int
	now      func() time.Time

	mu   sync.Mutex
	keys map[slotKey]*slot
	// open holds the slots of live windows, oldest start first: windows
	// all last the same time, so they expire in that order too, and a
	// sweep looks only at the front.
	open list.List
	// owners are the owners holding windows, with a perOwner budget.
	owners map[string]*owner
}

type slotKey struct{ owner, key string }

type slot struct {
	id    slotKey
	start time.Time
	count int
	// pending is the reservations neither committed nor released; they
	// outlive the window they were taken in.
	pending int
	// wake, when not nil, is closed when a pending reservation ends, for
	// the reservations waiting for one.
	wake chan struct{}
	// inOpen is the slot's element in Limiter.open, nil once its window
	// has expired while places are still held.
	inOpen *list.Element
	// owner and inOwner are its owner's record and its element in the
	// owner's list, when the limiter has a per-owner budget.
	owner   *owner
	inOwner *list.Element
}

// owner is one owner's live windows, oldest start first.
type owner struct {
	name    string
	windows list.List
}

// New returns a limiter of limit events per window per key, holding at
// most maxKeys windows at once ([DefaultMaxKeys] when maxKeys <= 0).
// now is the clock; nil means time.Now. A limit below 1 allows everything.
func New(limit int, window time.Duration, maxKeys int, now func() time.Time) *Limiter {
	return NewPerOwner(limit, window, 0, maxKeys, now)
}

// NewPerOwner returns a limiter like [New] that also holds at most
// perOwner windows of each owner of [Limiter.TakeOwned] at once (no such
// bound when perOwner <= 0). Take, Add and Reserve count their keys as
// the owner "", whose budget only TakeOwned checks.
func NewPerOwner(limit int, window time.Duration, perOwner, maxKeys int, now func() time.Time) *Limiter {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{
		limit: limit, window: window, maxKeys: maxKeys, perOwner: perOwner, now: now,
		keys: map[slotKey]*slot{}, owners: map[string]*owner{},
	}
}

func (l *Limiter) disabled() bool { return l == nil || l.limit < 1 || l.window <= 0 }

// Take counts one event of key. It reports whether the event is within
// the limit and, when it is not, how long until key's window ends (one
// window when the limiter is full). Refused events are not counted.
func (l *Limiter) Take(key string) (ok bool, retryAfter time.Duration) {
	if l.disabled() {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s := l.slot(slotKey{key: key}, now)
	if s == nil {
		return false, l.window
	}
	if s.count >= l.limit {
		return false, l.ends(s, now)
	}
	s.count++
	return true, 0
}

// Verdict is what [Limiter.TakeOwned] decided.
type Verdict struct {
	// OK is true when the event is within the limits.
	OK bool
	// RetryAfter, when the event is refused, is how long until it could
	// pass: until the key's window ends or, over the budget, until the
	// owner's oldest window ends.
	RetryAfter time.Duration
	// OverBudget is true when the event was refused because its owner
	// holds its budget of windows and key has none, not because key
	// reached its limit.
	OverBudget bool
}

// TakeOwned counts one event of owner's key, as Take does, with two
// differences. An owner holding its per-owner budget of windows is
// refused keys it has no window for (its other keys count on as usual).
// A full limiter lets a new key of an owner within its budget through
// uncounted: with the budget, only many owners together can fill it, and
// refusing would lock out every owner who did not.
func (l *Limiter) TakeOwned(owner, key string) Verdict {
	if l.disabled() {
		return Verdict{OK: true}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	id := slotKey{owner: owner, key: key}
	if _, held := l.keys[id]; !held && l.perOwner > 0 {
		if o := l.owners[owner]; o != nil && o.windows.Len() >= l.perOwner {
			oldest := o.windows.Front().Value.(*slot)
			return Verdict{RetryAfter: l.ends(oldest, now), OverBudget: true}
		}
	}
	s := l.slot(id, now)
	if s == nil {
		return Verdict{OK: true}
	}
	if s.count >= l.limit {
		return Verdict{RetryAfter: l.ends(s, now)}
	}
	s.count++
	return Verdict{OK: true}
}

// Add counts one event of key without checking the limit (a failed
// login, say).
func (l *Limiter) Add(key string) {
	if l.disabled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.slot(slotKey{key: key}, l.now()); s != nil {
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
	key slotKey
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
	if l.disabled() {
		return Reservation{}, nil
	}
	id := slotKey{key: key}
	l.mu.Lock()
	for {
		now := l.now()
		s := l.slot(id, now)
		switch {
		case s == nil:
			l.mu.Unlock()
			return Reservation{}, nil
		case s.count >= l.limit:
			retry := l.ends(s, now)
			l.mu.Unlock()
			return Reservation{}, &LimitError{RetryAfter: retry}
		case s.count+s.pending < l.limit:
			s.pending++
			l.mu.Unlock()
			return Reservation{l: l, key: id}, nil
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
	// A slot holding places is never dropped, so key's slot is there
	// whatever the time.
	s := l.keys[r.key]
	s.pending--
	now := l.now()
	if s.inOpen == nil || !now.Before(s.start.Add(l.window)) {
		// The window the place was taken in is over: a failure found
		// now counts in a new one.
		s.count = 0
		if count {
			l.reopen(s, now)
		}
	}
	if count {
		s.count++
	}
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	l.dropIfIdle(s)
}

// dropIfIdle forgets s when it counts nothing and holds no place, so that
// checks that succeed leave no trace. The caller holds l.mu.
func (l *Limiter) dropIfIdle(s *slot) {
	if s.count == 0 && s.pending == 0 {
		l.unlink(s)
		delete(l.keys, s.id)
	}
}

// Len is the number of windows held, for tests of the memory bound.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// ends is how long until s's window ends.
func (l *Limiter) ends(s *slot, now time.Time) time.Duration {
	return s.start.Add(l.window).Sub(now)
}

// slot returns id's live window, opening one when needed, or nil when
// none can be opened: the limiter holds maxKeys windows. The caller
// holds l.mu.
func (l *Limiter) slot(id slotKey, now time.Time) *slot {
	l.sweep(now)
	s := l.keys[id]
	if s != nil {
		if s.inOpen == nil || !now.Before(s.start.Add(l.window)) {
			// Places still held were taken in the old window; they go
			// on counting against the limit until they end.
			s.count = 0
			l.reopen(s, now)
		}
		return s
	}
	if len(l.keys) >= l.maxKeys {
		return nil
	}
	s = &slot{id: id}
	l.keys[id] = s
	l.reopen(s, now)
	return s
}

// reopen starts s's window at now: the newest, at the back of the
// expiry order (and of its owner's). The caller holds l.mu.
func (l *Limiter) reopen(s *slot, now time.Time) {
	l.unlink(s)
	s.start = now
	s.inOpen = l.open.PushBack(s)
	if l.perOwner <= 0 {
		return
	}
	o := l.owners[s.id.owner]
	if o == nil {
		o = &owner{name: s.id.owner}
		l.owners[o.name] = o
	}
	s.owner, s.inOwner = o, o.windows.PushBack(s)
}

// unlink takes s out of the expiry order and its owner's windows: its
// window is over or forgotten. The caller holds l.mu.
func (l *Limiter) unlink(s *slot) {
	if s.inOpen != nil {
		l.open.Remove(s.inOpen)
		s.inOpen = nil
	}
	if s.owner != nil {
		s.owner.windows.Remove(s.inOwner)
		if s.owner.windows.Len() == 0 {
			delete(l.owners, s.owner.name)
		}
		s.owner, s.inOwner = nil, nil
	}
}

// sweep forgets the windows expired by now, oldest first, stopping at the
// first live one: each window is looked at once when it expires, so a
// sweep costs O(1) amortized. A slot still holding places stays (out of
// the order) until they end. The caller holds l.mu.
func (l *Limiter) sweep(now time.Time) {
	for e := l.open.Front(); e != nil; e = l.open.Front() {
		s := e.Value.(*slot)
		if now.Before(s.start.Add(l.window)) {
			return
		}
		l.unlink(s)
		if s.pending == 0 {
			delete(l.keys, s.id)
		}
	}
}
