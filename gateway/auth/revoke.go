package auth

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RevocationsFile holds the ids of tokens revoked by logout, in the data
// directory, one "id expiry-unix" line each.
const RevocationsFile = "rscoord-revoked-tokens"

// DefaultMaxRevocations bounds the revoked tokens remembered at once.
const DefaultMaxRevocations = 100_000

// Revocation errors.
var (
	// ErrNoRevocations: the authenticator keeps no revocations.
	ErrNoRevocations = errors.New("auth: token revocation is not configured")
	// ErrTooManyRevocations: the revocation list is full of unexpired
	// tokens; the caller should retry later.
	ErrTooManyRevocations = errors.New("auth: too many revoked tokens outstanding")
)

// Revocations remembers revoked token ids until their tokens expire.
//
// Each revocation is appended to [RevocationsFile] and synced before
// Revoke returns, so it survives a crash and a restart; expired ids are
// dropped when the file is compacted (at open, and when it holds twice the
// live ids). Losing the file (a wiped data directory) also loses the
// generated token secret, which invalidates every token anyway; with
// RSCOORD_TOKEN_SECRET set, tokens revoked before the loss work again until
// they expire. It is safe for concurrent use; a nil *Revocations revokes
// nothing.
type Revocations struct {
	path string
	max  int
	now  func() time.Time
	// shared, when set, stores revocations instead of the file (see
	// [OpenSharedRevocations]).
	shared SharedRevocations

	mu    sync.Mutex
	ids   map[string]time.Time
	file  *os.File
	lines int
}

// OpenRevocations loads the revocations kept in dir (none when the file is
// missing), keeping at most max unexpired ids (0: [DefaultMaxRevocations]).
// now is the clock; nil means time.Now.
func OpenRevocations(dir string, max int, now func() time.Time) (*Revocations, error) {
	if max <= 0 {
		max = DefaultMaxRevocations
	}
	if now == nil {
		now = time.Now
	}
	r := &Revocations{path: filepath.Join(dir, RevocationsFile), max: max, now: now, ids: map[string]time.Time{}}
	raw, err := os.ReadFile(r.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read revoked tokens: %w", err)
	}
	lines := strings.Split(string(raw), "\n")
	for n, line := range lines {
		if line == "" {
			continue
		}
		id, exp, ok := strings.Cut(line, " ")
		unix, err := strconv.ParseInt(exp, 10, 64)
		if !ok || id == "" || err != nil {
			// A torn last line (crash mid-append) is the only damage an
			// append-only file can take; its revocation was never confirmed.
			if n == len(lines)-1 {
				continue
			}
			return nil, fmt.Errorf("revoked tokens file %s is damaged at line %d", r.path, n+1)
		}
		r.ids[id] = time.Unix(unix, 0)
	}
	if err := r.compact(); err != nil {
		return nil, err
	}
	return r, nil
}

// SharedRevocations keeps revocations where every replica of a cluster
// finds them (the cluster mode's etcd), so that a token revoked through
// one replica is refused by all, also after a failover. Each replica
// learns what the others stored through [Revocations.Remember].
type SharedRevocations interface {
	// Put stores that token id is revoked until exp; the revocation is
	// durable when Put returns nil.
	Put(ctx context.Context, id string, exp time.Time) error
}

// sharedPutTimeout bounds one [SharedRevocations.Put]: logout answers an
// error rather than hang when the shared store is unreachable.
const sharedPutTimeout = 5 * time.Second

// OpenSharedRevocations keeps revocations in shared instead of a file,
// remembering at most max unexpired ids (0: [DefaultMaxRevocations]).
// The caller loads what shared holds, and follows what other replicas add,
// through [Revocations.Remember]. now is the clock; nil means time.Now.
func OpenSharedRevocations(shared SharedRevocations, max int, now func() time.Time) *Revocations {
	if max <= 0 {
		max = DefaultMaxRevocations
	}
	if now == nil {
		now = time.Now
	}
	return &Revocations{max: max, now: now, shared: shared, ids: map[string]time.Time{}}
}

// Remember records a revocation stored by another replica (or found in
// the shared store at start). An expired one is ignored. Unlike [Revoke]
// it does not refuse when the list is full: the revocation is in force
// already, elsewhere, and forgetting it would let the token in here.
func (r *Revocations) Remember(id string, exp time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.now().Before(exp) {
		return
	}
	if len(r.ids) >= r.max {
		r.dropExpired()
	}
	r.ids[id] = exp
}

// Revoked reports whether token id was revoked and has not expired yet.
func (r *Revocations) Revoked(id string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}

// Revoke records token id as revoked until exp, durably.
func (r *Revocations) Revoke(id string, exp time.Time) error {
	if r == nil {
		return ErrNoRevocations
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ids[id]; ok {
		return nil
	}
	if len(r.ids) >= r.max {
		r.dropExpired()
		if len(r.ids) >= r.max {
			return ErrTooManyRevocations
		}
	}
	if r.shared != nil {
		// Stored before logout answers, so every replica will refuse the
		// token; not under r.mu, so token checks do not wait for etcd.
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), sharedPutTimeout)
		err := r.shared.Put(ctx, id, exp)
		cancel()
		r.mu.Lock()
		if err != nil {
			return fmt.Errorf("store revoked token: %w", err)
		}
		r.ids[id] = exp
		return nil
	}
	if _, err := fmt.Fprintf(r.file, "%s %d\n", id, exp.Unix()); err != nil {
		return fmt.Errorf("store revoked token: %w", err)
	}
	if err := r.file.Sync(); err != nil {
		return fmt.Errorf("store revoked token: %w", err)
	}
	r.ids[id] = exp
	r.lines++
	if r.lines > 2*len(r.ids)+1000 {
		// The revocation is durable already; a failed compaction only
		// leaves a longer file, retried on the next revocation.
		_ = r.compact()
	}
	return nil
}

// Close closes the file.
func (r *Revocations) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	return err
}

func (r *Revocations) dropExpired() {
	now := r.now()
	for id, exp := range r.ids {
		if !now.Before(exp) {
			delete(r.ids, id)
		}
	}
}

// compact rewrites the file with the unexpired ids only and reopens it
// for appending. r.mu is held (or r is not shared yet).
func (r *Revocations) compact() error {
	r.dropExpired()
	ids := make([]string, 0, len(r.ids))
	for id := range r.ids {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	for _, id := range ids {
		fmt.Fprintf(w, "%s %d\n", id, r.ids[id].Unix())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// On failure the old file stays open and in place: nothing is lost.
	if err := writeFileAtomic(r.path, buf.Bytes()); err != nil {
		return fmt.Errorf("compact revoked tokens: %w", err)
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open revoked tokens: %w", err)
	}
	if r.file != nil {
		_ = r.file.Close() // its content is in the new file
	}
	r.file, r.lines = f, len(ids)
	return nil
}
