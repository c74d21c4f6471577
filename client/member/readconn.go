package member

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redisconn"
)

// readConn is the connection on which one run's read loop sends its
// blocking reads (XREADGROUP … BLOCK … >), kept for the run's life, so
// that the end of the shard's ownership can cut a read short: the shard
// actor sends CLIENT UNBLOCK with the connection's CLIENT ID to the same
// node, over the node's pool, and the read returns at once with no
// entries. go-redis cannot abort a read on cancel, and a read that ran on
// to its BLOCK would delay REVOKED, a rejoin after a fence and a leave by
// up to WithBlock.
//
// The connection is the node's own client's (a *redis.Client, or the
// client ClusterClient.MasterForKey gives for the shard's key), so it has
// that client's dialer, TLS, credentials, NAT mapping and hooks (in a
// cluster: the node clients' hooks, OnNewNode; hooks added to the
// ClusterClient itself do not see these reads). It is borrowed from the
// node's pool and discarded, not returned, when dropped
// (EphemeralConn): a CLIENT ID the shard actor learnt can then never name
// a connection someone else uses, whatever the timing of an UNBLOCK.
//
// Who touches what: the read loop alone uses conn and node and closes the
// connection (drop, close); the shard actor reads target and id (under mu)
// to interrupt.
type readConn struct {
	key string
	// nodeFor returns the client of the node serving key.
	nodeFor func(ctx context.Context) (*redis.Client, error)

	// Read loop only.
	conn *redis.Conn
	node *redis.Client

	mu sync.Mutex
	// target and id are the node and CLIENT ID of conn while it exists.
	target *redis.Client
	id     int64
}

// masterForKey is what a Redis Cluster client has to name a key's node.
type masterForKey interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
}

// newReadConn returns the read connection of a run of key, or nil when
// rdb cannot give one: a client that is neither a *redis.Client nor has
// MasterForKey (a Ring, a wrapper). Without it blocking reads go over
// rdb's pool and are not interrupted; they end at their BLOCK, which never
// outlasts the lease (see fetch).
func newReadConn(rdb redis.UniversalClient, key string) *readConn {
	switch c := rdb.(type) {
	case *redis.Client:
		return &readConn{key: key, nodeFor: func(context.Context) (*redis.Client, error) { return c, nil }}
	case masterForKey:
		return &readConn{key: key, nodeFor: func(ctx context.Context) (*redis.Client, error) { return c.MasterForKey(ctx, key) }}
	}
	return nil
}

// get returns the connection, after taking one when there is none or when
// the key's node changed, and publishing its CLIENT ID. It fails with the
// context's error once the run is stopped. Read loop only.
func (c *readConn) get(ctx context.Context) (*redis.Conn, error) {
	node, err := c.nodeFor(ctx)
	if err != nil {
		return nil, fmt.Errorf("node of %s: %w", c.key, err)
	}
	if c.conn != nil && c.node != node {
		c.drop() // the slot map changed: read from the key's node now
	}
	if c.conn == nil {
		conn := node.EphemeralConn()
		id, err := conn.ClientID(ctx).Result()
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("CLIENT ID: %w", err)
		}
		c.conn, c.node = conn, node
		c.mu.Lock()
		c.target, c.id = node, id
		c.mu.Unlock()
	}
	// Checked after the id is published: a stop that came before this
	// check ends the loop here; one that comes after it is followed by
	// UNBLOCKs of this id until the loop returns (interruptUntil).
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.conn, nil
}

// sendOnce runs the command build makes, sent at most once
// (redisconn.SendOnce), on the run's read connection, or over the pool
// without one (rc nil). Any error on the connection drops it: the next
// command takes a new one and learns its id. A node that answers MOVED or
// ASK did not run the command, so sending it through the client, which
// follows the redirection and learns the new slot map, is still its first
// send; such a read is not interrupted, and ends at its BLOCK.
func sendOnce[C redis.Cmder](ctx context.Context, rdb redis.UniversalClient, rc *readConn, build func(redis.Pipeliner) C) C {
	if rc == nil {
		return redisconn.SendOnce(ctx, rdb, build)
	}
	conn, err := rc.get(ctx)
	if err != nil {
		cmd := build(rdb.Pipeline())
		cmd.SetErr(err)
		return cmd
	}
	cmd := redisconn.SendOnce(ctx, conn, build)
	err = cmd.Err()
	if err == nil || errors.Is(err, redis.Nil) {
		return cmd
	}
	rc.drop()
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	if moved || ask {
		return redisconn.SendOnce(ctx, rdb, build)
	}
	return cmd
}

// drop closes the connection, discarding it. Read loop only.
func (c *readConn) drop() {
	if c.conn == nil {
		return
	}
	c.mu.Lock()
	c.target, c.id = nil, 0
	c.mu.Unlock()
	_ = c.conn.Close()
	c.conn, c.node = nil, nil
}

// unblockTimeout bounds one CLIENT UNBLOCK; unblockEvery is the longest
// wait between two of them while the read loop has not returned.
const (
	unblockTimeout = time.Second
	unblockEvery   = 50 * time.Millisecond
)

// interruptUntil sends CLIENT UNBLOCK for the connection's id, again and
// again, until done is closed. The read loop's context must be cancelled
// first.
//
// Why this is sound: the loop checks its context after it has published
// the id of the connection it is about to read on (read) and before every
// read, so once the context is cancelled it sends at most the one read
// that passed its check before the cancel, on a connection whose id is
// already published. That read may reach Redis after an UNBLOCK (the two
// go over different connections, in no set order), which then finds
// nothing blocked; but UNBLOCKs go on until the loop has returned, and
// the first one Redis runs while the read is blocked ends it. An id is
// never reused by Redis and the connection is discarded when dropped, so
// a late UNBLOCK can cut short nobody else's command.
func (c *readConn) interruptUntil(ctx context.Context, done <-chan struct{}) {
	wait := time.Millisecond
	for {
		c.mu.Lock()
		node, id := c.target, c.id
		c.mu.Unlock()
		if node != nil {
			uctx, cancel := context.WithTimeout(ctx, unblockTimeout)
			// An error (Redis down, the pool exhausted) only means the
			// read ends at its BLOCK, bounded by the lease, as without
			// interruption; the next round tries again.
			_ = node.ClientUnblock(uctx, id).Err()
			cancel()
		}
		t := time.NewTimer(wait)
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, unblockEvery)
	}
}
