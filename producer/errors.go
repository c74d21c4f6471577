package producer

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/rscoord/rscoord/protocol"
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
	ErrStreamNotFound = errors.New("stream not found")
	// ErrGroupNotFound matches a CoordinatorError with GROUP_NOT_FOUND.
	ErrGroupNotFound = errors.New("consumer group not found")
)

// CoordinatorError is a non-2xx answer of the coordinator, decoded from its
// error body (docs/protocol.md §3). errors.Is matches ErrStreamNotFound and
// ErrGroupNotFound by error code.
type CoordinatorError struct {
	// StatusCode is the HTTP status, e.g. 404.
	StatusCode int
	// Body is the decoded error body; when the answer was not a §3 body,
	// ErrorCode is empty and Message holds the start of what was answered.
	Body protocol.ErrorBody
	// RetryAfter is the Retry-After header of a 429 or 503, if any.
	RetryAfter string
}

// Error reads "404 STREAM_NOT_FOUND: Stream not found".
func (e *CoordinatorError) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.StatusCode))
	if e.Body.ErrorCode != "" {
		b.WriteString(" " + string(e.Body.ErrorCode))
	} else if text := http.StatusText(e.StatusCode); text != "" {
		b.WriteString(" " + text)
	}
	if e.Body.Message != "" {
		b.WriteString(": " + e.Body.Message)
	}
	return b.String()
}

// Is matches ErrStreamNotFound and ErrGroupNotFound by error code.
func (e *CoordinatorError) Is(target error) bool {
	switch target {
	case ErrStreamNotFound:
		return e.Body.ErrorCode == protocol.CodeStreamNotFound
	case ErrGroupNotFound:
		return e.Body.ErrorCode == protocol.CodeGroupNotFound
	}
	return false
}
