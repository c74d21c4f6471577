package gateway

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/rscoord/rscoord/client/protocol"
)

// smallBodyBytes is the part of a request body read without reserving
// from the large-body budget: every heartbeat of a member owning up to
// about a hundred shards, every admin body in practice. Small bodies are
// bounded by the connection cap (HTTPLimits.MaxConnections × this).
const smallBodyBytes = 64 << 10

// DefaultBodyMemory is [Options.BodyMemory] when unset: four heartbeats
// at their limit, or a few hundred of members owning a thousand shards.
const DefaultBodyMemory = 256 << 20

// DefaultBodyMemoryWait is [Options.BodyMemoryWait] when unset.
const DefaultBodyMemoryWait = 10 * time.Second

// bodyMemory bounds the bytes that request bodies over smallBodyBytes
// hold at once: a body reserves its size past smallBodyBytes before it is
// read and releases it when its handler is done with it. Without it,
// every connection could hold a heartbeat at its limit (tens of MB) at
// once. A reservation is taken whole, never grown, so no two requests
// can each hold part of the budget while waiting for the rest.
type bodyMemory struct {
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
	// small keeps the buffers of small bodies (heartbeats) for reuse: a
	// body is read into one, decoded, and the buffer given back.
	small sync.Pool
}

func newBodyMemory(size int64, wait time.Duration) *bodyMemory {
	return &bodyMemory{sem: semaphore.NewWeighted(size), size: size, wait: wait}
}

// buffer is an empty buffer to read a body into; recycle gives it back
// once nothing refers to its bytes.
func (b *bodyMemory) buffer() *bytes.Buffer {
	if buf, ok := b.small.Get().(*bytes.Buffer); ok {
		return buf
	}
	return new(bytes.Buffer)
}

// recycle keeps buf for a later body unless it grew past a small body:
// the memory of large ones is bounded by the budget while they are read,
// and must not stay held afterwards.
func (b *bodyMemory) recycle(buf *bytes.Buffer) {
	if buf.Cap() > smallBodyBytes+bytes.MinRead {
		return
	}
	buf.Reset()
	b.small.Put(buf)
}

// reserve takes n bytes of the budget, waiting up to b.wait for them; past
// that the request is answered 429 (retry later). The caller releases
// what it got by calling release.
func (b *bodyMemory) reserve(ctx context.Context, n int64) (release func(), perr *protocol.Error) {
	n = min(n, b.size) // a body limit never exceeds the budget (New)
	ctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, protocol.Errorf(protocol.CodeRateLimitExceeded,
			fmt.Sprintf("the server is reading as many large request bodies as it holds at once (%d bytes); retry later", b.size))
	}
	return func() { b.sem.Release(n) }, nil
}
