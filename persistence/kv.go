package persistence

import (
	"context"
	"errors"
)

// kv is the little a store needs from its storage engine. Every engine
// (Pebble, memory, and any later one such as etcd) sits behind it, so the
// revision logic, key layout, encoding, cleaning and write accounting that
// [core] implements are the same code for all of them.
//
// Contract (the contract test in contract_test.go runs every engine through
// the store built on it):
//
//   - Reads are by key or by key range [lower, upper) in ascending or
//     descending key order, as of one point in time per call. A range is
//     always the keys of one prefix (a key space, a stream's groups, one
//     group's keys) or a bounded slice of the audit space.
//   - Every write is a commit: ONE atomic batch of puts and deletes. After
//     commit returns nil, every op is durable (synced: it survives a crash
//     of the process and of the machine) and visible to every later read;
//     no read, before or after a crash, ever sees some ops of a commit
//     without the others. An engine that replicates (etcd) runs a commit as
//     one transaction and may condition it on something of its own (an
//     owner key); a refused condition is an error like any other.
//   - A commit never holds two ops on one key, never more than the engine's
//     limits (see [kvLimits]) allow: core splits larger changes itself (see
//     the staged writes in group.go), so an engine need not.
//   - When commit returns an error, the outcome is unknown: none, or (for an
//     engine that cannot tell) all of its ops may be applied. Never a part.
//     core then treats the store's contents as unknown until it reopened
//     the engine (see [core.tryRecover]).
//   - Values and keys passed in are not retained after the call returns;
//     values handed to fn during a scan are valid only during that call,
//     values returned by get belong to the caller.
//   - ctx bounds calls that may block on the network; an engine on local
//     disk may ignore it. A commit whose ctx ends while it runs has an
//     unknown outcome, like any failed commit.
type kv interface {
	// get returns a copy of the value of key, or errNoKey.
	get(ctx context.Context, key []byte) ([]byte, error)
	// commit applies ops atomically and durably before it returns (see the
	// contract above).
	commit(ctx context.Context, ops []op) error
	// scan calls fn for every key in [lower, upper) in ascending key order,
	// as of one point in time. It stops at the first error fn returns and
	// returns it.
	scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error
	// scanReverse is scan in descending key order.
	scanReverse(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error
	// limits says how large one commit may be.
	limits() kvLimits
	// close releases the engine. It is called once, after every other call
	// returned.
	close() error
}

// op is one write of a commit: a put of value under key, or (del) a delete
// of key.
type op struct {
	key   []byte
	value []byte
	del   bool
}

func putOp(key, value []byte) op { return op{key: key, value: value} }

func delOp(key []byte) op { return op{key: key, del: true} }

// size is what an op costs in a commit: its key and value bytes.
func (o op) size() int { return len(o.key) + len(o.value) }

// kvLimits bound one commit. core keeps every commit within them, and every
// stored value well below MaxBytes.
type kvLimits struct {
	// MaxOps is the largest number of ops in one commit; 0 means no limit
	// (etcd's default --max-txn-ops is 128).
	MaxOps int
	// MaxBytes is the largest sum of key and value bytes in one commit
	// (etcd refuses requests over 1.5 MiB by default).
	MaxBytes int
}

// maxCommitBytes is the limit of the local engines: no commit above 1 MiB,
// so that a data directory written here also fits a replicated engine.
const maxCommitBytes = 1 << 20

var errNoKey = errors.New("no such key")

// errStopScan ends a scan early; the caller of scan treats it as success.
var errStopScan = errors.New("stop scan")
