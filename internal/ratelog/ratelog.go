// Package ratelog logs repeated warnings of one cause once, then at most
// once per interval with a count of the lines it held back, so that a
// misconfigured fleet or a client retrying bad credentials cannot flood
// the logs at its request rate.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the interval of a Logger made with none.
const DefaultInterval = time.Minute

// maxKeys bounds the causes a Logger remembers. Past it, keys it has not
// seen share one entry per message, so that callers naming keys after
// what a client sent (an address, a member id) cannot grow it.
const maxKeys = 4096

// Logger is a rate-limited front of a slog.Logger. It is safe for
// concurrent use.
type Logger struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu     sync.Mutex
	causes map[string]*cause
	// swept is when dropQuiet last ran: a full map is swept at most 16
	// times an interval, not on every line.
	swept time.Time
}

// cause is what a Logger remembers of one message and key: when it last
// wrote it, and how many it held back since.
type cause struct {
	logged     time.Time
	suppressed int
}

// New returns a Logger writing to log at most once per interval for each
// message and key (interval 0: [DefaultInterval]; now nil: time.Now).
func New(log *slog.Logger, interval time.Duration, now func() time.Time) *Logger {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if now == nil {
		now = time.Now
	}
	return &Logger{log: log, interval: interval, now: now, causes: map[string]*cause{}}
}

// Warn logs msg with args at WARN unless a line of the same msg and key
// was written less than the interval ago. A line written after some were
// held back carries their number as "suppressed".
func (l *Logger) Warn(msg, key string, args ...any) {
	l.Log(context.Background(), slog.LevelWarn, msg, key, args...)
}

// Log is Warn at any level.
func (l *Logger) Log(ctx context.Context, level slog.Level, msg, key string, args ...any) {
	if !l.log.Enabled(ctx, level) {
		return
	}
	write, suppressed := l.admit(msg, key)
	if !write {
		return
	}
	if suppressed > 0 {
		args = append(args, slog.Int("suppressed", suppressed), slog.Duration("suppressedWithin", l.interval))
	}
	l.log.Log(ctx, level, msg, args...)
}

// LogAttrs is Log with attributes.
func (l *Logger) LogAttrs(ctx context.Context, level slog.Level, msg, key string, attrs ...slog.Attr) {
	if !l.log.Enabled(ctx, level) {
		return
	}
	write, suppressed := l.admit(msg, key)
	if !write {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed), slog.Duration("suppressedWithin", l.interval))
	}
	l.log.LogAttrs(ctx, level, msg, attrs...)
}

// admit decides whether a line of msg and key is written now, and how
// many were held back before it.
func (l *Logger) admit(msg, key string) (write bool, suppressed int) {
	now := l.now()
	id := msg + "\x00" + key
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.causes[id]
	if c == nil && len(l.causes) >= maxKeys {
		if now.Sub(l.swept) >= l.interval/16 {
			l.dropQuiet(now)
			l.swept = now
		}
		if len(l.causes) >= maxKeys {
			id = msg
			c = l.causes[id]
		}
	}
	if c == nil {
		l.causes[id] = &cause{logged: now}
		return true, 0
	}
	if now.Sub(c.logged) < l.interval {
		c.suppressed++
		return false, 0
	}
	suppressed = c.suppressed
	c.logged, c.suppressed = now, 0
	return true, suppressed
}

// dropQuiet forgets the causes quiet for a whole interval: their next
// line would be written anyway. Their held-back counts are lost with
// them, which only understates a count. The caller holds l.mu.
func (l *Logger) dropQuiet(now time.Time) {
	for id, c := range l.causes {
		if now.Sub(c.logged) >= l.interval {
			delete(l.causes, id)
		}
	}
}
