package member

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { rdb.Close() })
	valid := []Opt{WithCoordinator("http://127.0.0.1:8080"), WithStream("orders"), WithRedis(rdb), WithBaseID("pod-a")}
	handler := func(context.Context, *Message) error { return nil }

	t.Run("defaults", func(t *testing.T) {
		rt, err := New(handler, valid...)
		if err != nil {
			t.Fatal(err)
		}
		c := rt.cfg
		if c.group != "orders" || c.concurrency != 1 || c.maxWorkers != 1 || c.block != time.Second ||
			c.batch != 64 || c.claimMinIdle != 30*time.Second || c.memberLease != 15*time.Second || c.leaveTimeout != 25*time.Second || c.ackMax != 256 || c.ackDelay != 5*time.Millisecond || c.syncAcks {
			t.Fatalf("unexpected defaults: %+v", c)
		}
		if c.redisFailureLimit != 3 || c.retryAttempts != 1 {
			t.Fatalf("unexpected defaults: %+v", c)
		}
		if got := rt.MemberIDs(); len(got) != 1 || got[0] != "pod-a-m0" {
			t.Fatalf("member ids %v", got)
		}
	})
	t.Run("coordinator URL is normalised", func(t *testing.T) {
		rt, err := New(handler, append(valid, WithCoordinator("http://h:1/coord/v1/"), WithConcurrency(3))...)
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.cfg.client.URLs(); len(got) != 1 || got[0] != "http://h:1" {
			t.Fatalf("coordinator %q", got)
		}
		if got := rt.MemberIDs(); strings.Join(got, ",") != "pod-a-m0,pod-a-m1,pod-a-m2" {
			t.Fatalf("member ids %v", got)
		}
	})

	tests := []struct {
		name    string
		handler Handler
		opts    []Opt
		want    []string // every one must appear in the error
	}{
		{"nothing", handler, nil, []string{"WithCoordinator", "WithStream", "WithGroup", "WithRedis"}},
		{"nil handler", nil, valid, []string{"handler is required"}},
		{"bad URL", handler, append(valid, WithCoordinator("ftp://x")), []string{"want host:port"}},
		{"bad stream", handler, append(valid, WithStream("a{b}")), []string{"WithStream"}},
		{"bad group", handler, append(valid, WithGroup("a b")), []string{"WithGroup"}},
		{"bad base id", handler, append(valid, WithBaseID("a/b")), []string{"WithBaseID"}},
		{"numbers out of range", handler, append(valid, WithConcurrency(0), WithMaxWorkers(0), WithBatch(0)),
			[]string{"WithConcurrency", "WithMaxWorkers", "WithBatch"}},
		{"durations", handler, append(valid, WithBlock(0), WithClaimMinIdle(0), WithMemberLease(time.Millisecond), WithLeaveTimeout(0)),
			[]string{"WithBlock", "WithClaimMinIdle", "WithMemberLease", "WithLeaveTimeout"}},
		{"block not shorter than lease", handler, append(valid, WithBlock(2*time.Second), WithMemberLease(time.Second)),
			[]string{"must be shorter than the member lease"}},
		{"member name", handler, append(valid, WithMemberName("")), []string{"WithMemberName"}},
		{"redis failure limit and handler retry", handler,
			append(valid, WithRedisFailureLimit(0), WithHandlerRetry(0, 0, time.Second)),
			[]string{"WithRedisFailureLimit", "WithHandlerRetry: 0 attempts", "WithHandlerRetry: the delay"}},
		{"retry delay over its max", handler, append(valid, WithHandlerRetry(3, time.Second, time.Millisecond)),
			[]string{"at most the max delay"}},
	}
	t.Run("nil batch handler", func(t *testing.T) {
		if _, err := NewBatch(nil, valid...); err == nil || !strings.Contains(err.Error(), "batch handler is required") {
			t.Fatalf("NewBatch(nil) = %v", err)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.handler, tt.opts...)
			if err == nil {
				t.Fatal("New accepted invalid options")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
