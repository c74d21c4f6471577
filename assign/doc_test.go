package assign_test

import (
	"fmt"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// Example runs the group actor's steps of the package documentation for two
// heartbeats and a timer.
func Example() {
	cfg := assign.Config{}.EnsureDefaults()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g := assign.NewGroup("orders", "billing", 4, now)

	handle := func(req *protocol.HeartbeatRequest, at time.Time) {
		// 1. Validate.
		if refusal := assign.Validate(req, req.MemberID); refusal.Refused() {
			fmt.Println("rejected:", refusal.Answer(req, cfg).Status)
			return
		}
		// 3. Decide.
		res := assign.Heartbeat(g, req, at, cfg)
		// 4. Persist before answering (a store write in the real actor).
		if res.Persist {
			fmt.Println("persist")
		}
		// 5. Answer.
		r := res.Response
		fmt.Println(r.Status, "epoch", r.MemberEpoch, "assigned", protocol.Indexes(r.Assignment.AssignedShards),
			"next heartbeat in", time.Duration(r.HeartbeatIntervalMs)*time.Millisecond)
		// 6. Schedule Tick at res.Next.
		fmt.Println("tick at +", res.Next.Sub(now))
	}

	join := &protocol.HeartbeatRequest{ProtocolVersion: 1, RequestID: "r1", MemberID: "pod-a-m0",
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1}}
	handle(join, now)

	steady := *join
	steady.RequestID, steady.MemberEpoch, steady.MetadataVersion = "r2", 1, 2
	steady.OwnedShards = protocol.Shards([]int{0, 1, 2, 3})
	handle(&steady, now.Add(3*time.Second))

	// A third, steady heartbeat persists nothing.
	third := steady
	third.RequestID = "r3"
	handle(&third, now.Add(6*time.Second))

	// The member goes quiet; the actor's timer fires at its lease.
	res := assign.Tick(g, now.Add(21*time.Second), cfg)
	fmt.Println("expired", res.Events.Expired, "persist", res.Persist, "state", g.Summary().State)

	// Output:
	// persist
	// OK epoch 1 assigned [0 1 2 3] next heartbeat in 200ms
	// tick at + 15s
	// persist
	// OK epoch 1 assigned [0 1 2 3] next heartbeat in 3s
	// tick at + 18s
	// OK epoch 1 assigned [0 1 2 3] next heartbeat in 3s
	// tick at + 18s
	// expired [pod-a-m0] persist true state EMPTY
}
