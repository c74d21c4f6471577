package persistence

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a [Store] returns for one of these conditions
// wraps the sentinel (test with [errors.Is]) and adds the record it concerns.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("persistence: not found")
	// ErrCorrupt: a stored record fails its checksum or does not decode as the
	// schema it claims. The record fails closed: it is never guessed at,
	// repaired or overwritten by this package.
	ErrCorrupt = errors.New("persistence: corrupt record")
	// ErrUnknownSchema: a stored record (or the store's key layout) carries a
	// schema version this build does not know, typically written by a newer
	// build. Old code refuses new data: the record is neither decoded nor
	// overwritten.
	ErrUnknownSchema = errors.New("persistence: unknown schema version")
	// ErrStaleRevision: a conditional write or delete named a revision other
	// than the stored one (0 for "must not exist").
	ErrStaleRevision = errors.New("persistence: stale revision")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("persistence: store closed")
	// ErrFailed: an earlier write failed in a way that leaves the on-disk state
	// unknown (Pebble treats a failed WAL write or sync as fatal, and the
	// failed batch may already be visible to reads). The store refuses every
	// call from then on; the process must reopen it to learn what is durable.
	ErrFailed = errors.New("persistence: store failed after a write error")
)

// recordError is a failure of one record (or of the store) that wraps one of
// the sentinels above. Its text names the sentinel first, then the record,
// then the detail: "persistence: corrupt record: group orders/g: checksum
// mismatch (…)".
type recordError struct {
	sentinel error
	record   string // e.g. "group orders/g"; empty until known
	detail   string
	cause    error // optional underlying error, also matched by errors.Is
}

func newErr(sentinel error, format string, args ...any) error {
	return &recordError{sentinel: sentinel, detail: fmt.Sprintf(format, args...)}
}

func (e *recordError) Error() string {
	s := e.sentinel.Error()
	for _, part := range []string{e.record, e.detail} {
		if part != "" {
			s += ": " + part
		}
	}
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *recordError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// opErr adds what the failing call was about (a record, an operation) to
// err, naming the package once.
func opErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if re, ok := err.(*recordError); ok {
		if re.record != "" {
			return err
		}
		c := *re
		c.record = what
		return &c
	}
	return fmt.Errorf("persistence: %s: %w", what, err)
}
