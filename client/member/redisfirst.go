package member

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis first: a member joins only with a Redis that answers, and gives
// its shards back when Redis keeps failing, so that a member that cannot
// read never holds shards a healthy member could read (doc.go rule 14).

// Back-off bounds of the Redis probe while Redis does not answer.
const (
	redisBackoffMin = 100 * time.Millisecond
	redisBackoffMax = 5 * time.Second
)

// redisProbeMsg carries the outcome of one PING.
type redisProbeMsg struct {
	core *memberCore
	err  error
}

// redisRetryMsg: time to PING Redis again.
type redisRetryMsg struct{}

// readFailedMsg: a run's read loop failed failures reads in a row.
type readFailedMsg struct {
	run      *shardRun
	failures int
	err      error
}

func (*redisProbeMsg) IgnoreDeadLetterLogging() {}
func (*redisRetryMsg) IgnoreDeadLetterLogging() {}
func (*readFailedMsg) IgnoreDeadLetterLogging() {}

// waitForRedis keeps the member out of the group until Redis answers a
// PING: it probes now, then with backoff; a success sends the join.
func (a *memberActor) waitForRedis(why string) {
	a.redisDown, a.reason = true, why
	a.probeRedis()
}

// probeRedis PINGs Redis on a goroutine owned by the actor (waited for in
// shutdown, like heartbeats); the outcome comes back as a redisProbeMsg.
func (a *memberActor) probeRedis() {
	if a.probeBusy || a.stopped || a.done {
		return
	}
	a.probeBusy = true
	ctx, cancel := context.WithTimeout(a.hbCtx, a.rs.requestTimeout)
	root, self, core := a.rs.system.Root, a.self, a.core
	a.hbWG.Add(1)
	go func() {
		defer a.hbWG.Done()
		err := ping(ctx, core.rdb)
		cancel()
		root.Send(self, &redisProbeMsg{core: core, err: err})
	}()
}

// ping asks Redis whether it answers: every master of a Redis Cluster
// (each holds some shard's slot; one answering master proves nothing for
// the others), else the one server.
func ping(ctx context.Context, rdb redis.UniversalClient) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			if err := c.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("PING %s: %w", c.Options().Addr, err)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("PING every master: %w", err)
		}
		return nil
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	return nil
}

func (a *memberActor) onRedisProbe(m *redisProbeMsg) {
	if m.core != a.core {
		return
	}
	a.probeBusy = false
	if a.stopped || a.done || !a.redisDown {
		return
	}
	if m.err != nil {
		a.redisFailures++
		a.redisBackoff = min(max(a.redisBackoff*2, redisBackoffMin), redisBackoffMax)
		a.reason = "Redis does not answer: " + m.err.Error()
		if a.redisFailures == 1 || a.redisFailures%10 == 0 {
			a.log.Warn("Redis does not answer; not joining until it does", slog.Int("failures", a.redisFailures),
				slog.Duration("backoff", a.redisBackoff), slog.Any("error", m.err))
		}
		stopTimer(&a.redisTimer)
		a.redisTimer = a.timer(jitter(a.redisBackoff), &redisRetryMsg{})
		return
	}
	if a.redisFailures > 0 {
		a.log.Info("Redis answers again; joining", slog.Int("failures", a.redisFailures))
	}
	a.redisDown, a.redisFailures, a.redisBackoff, a.reason = false, 0, 0, ""
	if a.leaving {
		a.maybeLeave()
		return
	}
	a.beat()
}

// onReadFailed gives every shard back after a run failed its reads
// WithRedisFailureLimit times in a row: a graceful leave (reads stop,
// records in flight drain, every shard reported REVOKED, memberEpoch -1),
// then a rejoin once Redis answers a PING again.
func (a *memberActor) onReadFailed(m *readFailedMsg) {
	if a.runs[m.run.shard] != m.run || a.leaving || a.done || a.stopped || a.epoch <= 0 {
		return
	}
	err := fmt.Errorf("%d reads of %s failed in a row: %w", m.failures, m.run.key, m.err)
	a.log.Warn("Redis keeps failing: giving every shard back; rejoining once it answers", slog.Any("error", err))
	a.giveBack = true
	a.reason = "giving shards back: " + err.Error()
	a.beginLeave(time.Time{})
}

// afterGiveBack is the end of the leave that gave the shards back: the
// member is out of the group (epoch 0, owns nothing) and waits for Redis.
func (a *memberActor) afterGiveBack() {
	a.giveBack = false
	a.leaving, a.leaveSent, a.leaveExpired = false, false, false
	stopTimer(&a.leaveTimer)
	a.epoch, a.version = 0, 0
	a.owned = []int{}
	clear(a.revoking)
	a.lastView = ""
	a.suspended = false
	a.rejoins++
	a.waitForRedis("gave shards back after Redis failures; waiting for Redis")
}
