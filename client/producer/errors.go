package producer

import (
	"errors"

	"github.com/rscoord/rscoord/client/coordclient"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrRoutingLeaseExpired: the routing was last refreshed longer ago than
	// the routing lease (the coordinator is unreachable, say). Nothing was
	// published; the producer keeps trying to refresh in the background.
	ErrRoutingLeaseExpired = errors.New("routing lease expired")
	// ErrNoShards: the stream has no shards (it was scaled to 0), so there is
	// nowhere to publish.
	ErrNoShards = errors.New("stream has no shards")
	// ErrShardStreamMissing: the routed shard stream did not exist in Redis on
	// every attempt, even after refreshing the routing. The stream keys were
	// not provisioned, or were deleted behind the coordinator's back.
	ErrShardStreamMissing = errors.New("shard stream missing in Redis")
	// ErrNotStarted: Publish was called before Start succeeded.
	ErrNotStarted = errors.New("producer not started")
	// ErrClosed: the producer was closed.
	ErrClosed = errors.New("producer closed")
	// ErrInvalidFields: a record's fields are empty or of an unsupported type.
	ErrInvalidFields = errors.New("invalid record fields")
	// ErrStreamNotFound matches a CoordinatorError with STREAM_NOT_FOUND.
	ErrStreamNotFound = coordclient.ErrStreamNotFound
	// ErrGroupNotFound matches a CoordinatorError with GROUP_NOT_FOUND.
	ErrGroupNotFound = coordclient.ErrGroupNotFound
)

// CoordinatorError is a non-2xx answer of the coordinator, decoded from its
// error body (docs/protocol.md §3): the one error type of the coordinator
// wire layer. errors.Is matches ErrStreamNotFound and ErrGroupNotFound by
// error code; RetryAfter is the Retry-After of a 429 or 503.
type CoordinatorError = coordclient.Error
