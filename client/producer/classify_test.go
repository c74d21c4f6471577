package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// replyError is an error reply of Redis, as go-redis types it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

// refusedDial is the error go-redis returns for a command to a port where
// nothing listens: the XADD never left the client.
func refusedDial(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	err = rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: "s", Values: []any{"f", "v"}}).Err()
	if err == nil {
		t.Fatal("XADD to a closed port succeeded")
	}
	return err
}

func TestClassify(t *testing.T) {
	refused := refusedDial(t)
	tests := []struct {
		name                       string
		err                        error
		retryable, possiblyWritten bool
		cause                      error
	}{
		{"invalid fields", fmt.Errorf("producer: publish: %w", ErrInvalidFields), false, false, ErrInvalidFields},
		{"no shards", fmt.Errorf("x: %w", ErrNoShards), false, false, ErrNoShards},
		{"stream missing", fmt.Errorf("x: %w", ErrShardStreamMissing), false, false, ErrShardStreamMissing},
		{"closed", fmt.Errorf("x: %w", ErrClosed), false, false, ErrClosed},
		{"not started", fmt.Errorf("x: %w", ErrNotStarted), false, false, ErrNotStarted},
		{"lease expired", fmt.Errorf("x: %w", ErrRoutingLeaseExpired), true, false, ErrRoutingLeaseExpired},
		{"connection lost after send", fmt.Errorf("x: %w", &sentError{io.EOF}), true, true, io.EOF},
		{"timeout after send", fmt.Errorf("x: %w", &sentError{context.DeadlineExceeded}), true, true, context.DeadlineExceeded},
		{"loading reply", fmt.Errorf("x: %w", &sentError{replyError("LOADING Redis is loading")}), true, false, nil},
		{"readonly reply", fmt.Errorf("x: %w", &sentError{replyError("READONLY You can't write")}), true, false, nil},
		{"refused dial", fmt.Errorf("x: %w", &sentError{refused}), true, false, nil},
		{"pool timeout", fmt.Errorf("x: %w", &sentError{redis.ErrPoolTimeout}), true, false, redis.ErrPoolTimeout},
		{"client closed", fmt.Errorf("x: %w", &sentError{redis.ErrClosed}), false, false, redis.ErrClosed},
		{"wrongtype reply", fmt.Errorf("x: %w", &sentError{replyError("WRONGTYPE Operation")}), false, false, nil},
		{"refresh failed", fmt.Errorf("x: %w", io.ErrUnexpectedEOF), true, false, io.ErrUnexpectedEOF},
		{"stream not found", fmt.Errorf("x: %w", ErrStreamNotFound), false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify(tt.err)
			if got := errors.Is(err, ErrRetryable); got != tt.retryable {
				t.Errorf("retryable %v, want %v", got, tt.retryable)
			}
			if got := errors.Is(err, ErrPossiblyWritten); got != tt.possiblyWritten {
				t.Errorf("possibly written %v, want %v", got, tt.possiblyWritten)
			}
			var pe *PublishError
			if !errors.As(err, &pe) {
				t.Fatalf("%v is no *PublishError", err)
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("%v does not match its cause %v", err, tt.cause)
			}
			if err.Error() != tt.err.Error() {
				t.Errorf("message %q, want %q", err.Error(), tt.err.Error())
			}
		})
	}
	if classify(nil) != nil {
		t.Error("classify(nil) is not nil")
	}
}
