package redisconn

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Once marks cmd so that go-redis sends it at most once. By default go-redis
// sends a command again when its answer is lost (a connection reset, EOF), and
// for a command that is not idempotent that second send is a second effect:
// an XADD writes its record twice, an XREADGROUP … > moves more entries into
// the reader's pending list than the one answer it returns. A command marked
// Once fails instead, and its caller decides (the producer reports the record
// as possibly written; the member reads its own pending entries first). A
// command that never reached Redis is still sent again: that is its first
// send. Queue the result on a pipeline, or run it with Process; the answer
// lands in cmd. A go-redis hook sees the mark, not cmd: its
// Unwrap() redis.Cmder method gives cmd back, for hooks that look at a
// command's concrete type.
func Once(cmd redis.Cmder) redis.Cmder { return onceCmd{cmd} }

// onceCmd is a command whose NoRetry says what Once promises; every other
// method is the wrapped command's, so the answer is read into it.
type onceCmd struct{ redis.Cmder }

func (onceCmd) NoRetry() bool { return true }

// Unwrap returns the marked command.
func (c onceCmd) Unwrap() redis.Cmder { return c.Cmder }

// Sender is what [SendOnce] runs a command on: any redis.UniversalClient
// (*redis.Client, *redis.ClusterClient), or one connection, a *redis.Conn.
type Sender interface {
	Pipeline() redis.Pipeliner
	Process(ctx context.Context, cmd redis.Cmder) error
}

// SendOnce runs the command build makes on rdb, marked [Once], and returns it
// with its answer. build gets a pipeline that is never run, so go-redis's own
// argument builders (XAdd, XReadGroup, with their read timeouts) make the
// command without sending it.
func SendOnce[C redis.Cmder](ctx context.Context, rdb Sender, build func(redis.Pipeliner) C) C {
	cmd := build(rdb.Pipeline())
	_ = rdb.Process(ctx, Once(cmd)) // the error is also cmd's
	return cmd
}
