package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Classes of publish errors; test with errors.Is. Every error Publish and
// PublishBatch return matches neither, one or both.
var (
	// ErrRetryable: publishing the record again, later, may succeed (the
	// routing lease ran out, the coordinator or Redis did not answer,
	// Redis was loading or failing over). Not retryable: invalid fields,
	// a stream with no shards or no shard streams, a closed or unstarted
	// producer, a command Redis refused for good (WRONGTYPE, say).
	ErrRetryable = errors.New("retryable")
	// ErrPossiblyWritten: the XADD was sent and no answer came back (a
	// connection error, a timeout, a cancelled context), so the record may
	// be in the stream: publishing it again may write it twice. Errors not
	// matching it are known not to have written the record: among them
	// those that prove the XADD never left the client (a refused dial, no
	// free connection in the pool, a closed client).
	ErrPossiblyWritten = errors.New("possibly written")
)

// PublishError is a classified publish error: errors.Is matches
// [ErrRetryable] and [ErrPossiblyWritten] by its flags, and Unwrap gives
// the cause, so errors.Is(err, ErrRoutingLeaseExpired) keeps working.
type PublishError struct {
	Err             error
	Retryable       bool
	PossiblyWritten bool
}

func (e *PublishError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *PublishError) Unwrap() error { return e.Err }

// Is matches ErrRetryable and ErrPossiblyWritten by the flags.
func (e *PublishError) Is(target error) bool {
	return (target == ErrRetryable && e.Retryable) || (target == ErrPossiblyWritten && e.PossiblyWritten)
}

// sentError marks an error of a command that was sent to Redis and may
// have been executed; only XADD errors get it.
type sentError struct{ err error }

func (e *sentError) Error() string { return e.err.Error() }
func (e *sentError) Unwrap() error { return e.err }

// transientReplies are Redis error replies after which the same command
// may succeed: the server did not execute it.
var transientReplies = []string{"LOADING", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "BUSY", "OOM", "NOREPLICAS"}

// notSent reports whether err proves the command never left the client:
// no connection could be made (a refused or failed dial, a name that does
// not resolve), none was free in the pool in time, or the client was
// closed.
func notSent(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed)
}

// classify wraps err in a *PublishError; nil stays nil.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var pe *PublishError
	if errors.As(err, &pe) {
		return err
	}
	c := &PublishError{Err: err}
	var sent *sentError
	var reply redis.Error
	switch {
	case errors.Is(err, ErrInvalidFields), errors.Is(err, ErrNoShards), errors.Is(err, ErrShardStreamMissing),
		errors.Is(err, ErrNotStarted), errors.Is(err, ErrClosed):
	case errors.Is(err, ErrRoutingLeaseExpired):
		c.Retryable = true
	case errors.As(err, &sent) && notSent(err):
		// No connection carried the XADD (the dial failed, the pool had
		// none to give, the client was closed): it was never written.
		c.Retryable = !errors.Is(err, redis.ErrClosed)
	case errors.As(err, &sent) && errors.As(err, &reply):
		// An error reply: Redis answered, so it did not write.
		msg := reply.Error()
		for _, p := range transientReplies {
			if strings.HasPrefix(msg, p) {
				c.Retryable = true
			}
		}
	case errors.As(err, &sent):
		c.Retryable, c.PossiblyWritten = true, true
	default:
		// Routing refresh failures (coordinator unreachable, 5xx): nothing
		// was sent to Redis.
		c.Retryable = !errors.Is(err, ErrStreamNotFound) && !errors.Is(err, ErrGroupNotFound)
	}
	return c
}

// PublishMap publishes fields (field order is Go's map order); it is
// Publish with a typed argument. Errors as for [Producer.Publish].
func (p *Producer) PublishMap(ctx context.Context, partitionKey string, fields map[string]string) (streamKey, id string, err error) {
	return p.Publish(ctx, partitionKey, fields)
}

// PublishJSON publishes payload encoded as JSON in the one field
// [PayloadField]; a member reads it back with
// msg.JSON(member.PayloadField, &v). An unencodable payload fails with an
// error wrapping [ErrInvalidFields]. Errors as for [Producer.Publish].
func (p *Producer) PublishJSON(ctx context.Context, partitionKey string, payload any) (streamKey, id string, err error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return "", "", classify(fmt.Errorf("producer: publish: %w: %w", ErrInvalidFields, err))
	}
	return p.Publish(ctx, partitionKey, []string{PayloadField, string(b)})
}

// PayloadField is the field PublishJSON writes the JSON payload to; the
// member's PayloadField has the same value.
const PayloadField = "payload"

// Publisher is the part of a [Producer] an application publishes through:
// code that takes a Publisher is unit-tested with a fake of these two
// methods instead of a Producer, Redis and a coordinator.
type Publisher interface {
	Publish(ctx context.Context, partitionKey string, fields any) (streamKey, id string, err error)
	PublishBatch(ctx context.Context, records []Record) []Result
}

var _ Publisher = (*Producer)(nil)
