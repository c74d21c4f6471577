// Package member is the Go member runtime of rscoord: it joins a consumer
// group through the coordinator's heartbeats (docs/protocol.md §6), reads the
// Redis stream shards the coordinator grants, hands every record to a
// [Handler] and gives shards up when told to, so that no shard is ever read
// by two members at once.
//
//	rt, err := member.New(handle,
//		member.WithCoordinator("http://rscoord:8080"),
//		member.WithStream("orders"),
//		member.WithRedis(rdb),
//		member.WithConcurrency(2), // members {base}-m0 and {base}-m1
//		member.WithMaxWorkers(4),  // four handlers at once per member
//	)
//	if err != nil { … }
//	err = rt.Run(ctx) // until ctx is cancelled; then leaves gracefully
//
// # What the caller does, in order
//
//  1. Make the shard streams "{prefix}:0" … and the Redis consumer group on
//     each exist (the coordinator does it when it has Redis configured;
//     otherwise XGROUP CREATE key group 0 MKSTREAM).
//  2. Call [New] with a handler and options; it reports every bad option
//     at once. WithMemberLease must equal the coordinator's --member-lease.
//  3. Call [Runtime.Run] once. Cancel its context to leave (SIGTERM, say):
//     Run drains, leaves and returns nil. It returns early, with an error
//     errors.As finds, for what no retry heals: [*StreamNotFoundError],
//     [*GroupNotFoundError], [*AuthError] (401/403), [*ProtocolError]
//     (UNSUPPORTED_PROTOCOL, INVALID_REQUEST). Everything that may heal
//     (coordinator unreachable, RETRY, a duplicate member id, Redis down)
//     is retried with backoff and jitter and logged at WARN with the
//     reason; [Runtime.Ready] and [Runtime.Status] tell a readiness probe.
//  4. In the handler, settle each record: [Message.Ack], [Message.AckDel]
//     or [Message.Nack] ([AckAll], [AckDelAll] for a [BatchHandler] given
//     to [NewBatch]). Acks are coalesced into pipelined XACKs by default:
//     [Message.Ack] says what its return means. [WithDeadLetter] moves a
//     record that keeps failing ([Message.Deliveries]) to a dead-letter
//     stream instead of redelivering it for ever. An Ack that fails with [ErrFenced],
//     [ErrLeaseExpired] or [ErrRevoked] must not be retried: the record
//     will be redelivered to the shard's owner. Return an error for a
//     transient failure: WithHandlerRetry retries in place, keeping the
//     shard's order. WithHandlerDeadline(true) gives the handler's ctx the
//     member's lease end, as known when the record was handed over, as
//     its deadline (a renewal cannot move it).
//  5. Apps that run readers of their own use [WithHooks] (or
//     WithOnAssigned and WithOnRevoked): both are told the set of shards
//     and a [Reason]; when OnRevoked returns, their readers of those shards
//     must have stopped. [Runtime.Stats] (and package memberprom, for
//     Prometheus) tells what each member did per shard.
//
// # Incarnations and fencing tokens
//
// Every Runtime draws a random instanceId ([Runtime.InstanceID]) and sends
// it on every heartbeat, so the coordinator tells a replayed join of this
// process from a second process using the same member ids; the default
// base id (POD_NAME, else host name and process id) is unique per process
// anyway. Every [Message] carries the shard's ownerEpoch, a token the
// coordinator raises each time the shard moves: a downstream store that
// keeps the highest token per shard refuses a stale owner's writes (see
// the example of Message.OwnerEpoch).
//
// # Rules the runtime keeps
//
// A change to this package must keep each of these; the comment where one
// is enforced names it.
//
//  1. One logical member is one memberId, one heartbeat loop (one actor)
//     and one Redis consumer name, equal to the memberId. WithConcurrency(n)
//     makes n members "{base}-m0" … "{base}-m{n-1}"; WithMaxWorkers is the
//     local worker capacity of one member (runtimeMaxConcurrency) and never
//     makes members.
//  2. Heartbeats go one at a time, with the member's epoch, metadata
//     version, owned shards, shards being revoked and progress on owned
//     shards. The next one is sent after the answer's heartbeatIntervalMs
//     (capped at a third of the lease), at once after a fence, within a
//     few milliseconds after a shard is let go, and at once after an
//     answer that changed the member's status, assigned or pending shards
//     — never for a new epoch or metadata version alone (nextBeat says
//     when else: a steady member's heartbeats are held, docs/protocol.md
//     §9.5).
//  3. Answers are cleaned before use: shard lists sorted, de-duplicated and
//     stripped of negative indexes; non-positive epochs and intervals are
//     ignored; an answer to another request is an error.
//  4. OK: own exactly assignedShards. In order: stop reads on lost shards,
//     own the new set, start added shards. pendingShards are never read.
//     SYNC_METADATA and REVOKE_PENDING: take epoch and version, keep the
//     owned shards that are assigned, revoke the rest, start nothing.
//     RETRY: keep everything, heartbeat again; the lease is not renewed.
//     After the interval, or soon (100 ms doubling to 1 s) when its
//     errorCode says another replica may serve (the client has moved on,
//     coordclient's rules). A steady member's hold leaves the lease room
//     for the hedged copy of its heartbeat to reach a second replica; an
//     OK from any replica renews the lease.
//  5. Revocation: reads stop at once; records being handled finish and
//     may be acknowledged, records read and not handed to a worker yet
//     are handed back at once (left pending, marked long idle so that the
//     next owner's first XAUTOCLAIM takes them, in order, before new
//     entries), and retries in place end. The shard is reported REVOKING
//     while its read loop runs, DRAINING while records are in flight or
//     its acks and hand-backs are not sent yet, and REVOKED with inFlight
//     0 once all are done, until the coordinator has seen that report. The
//     shards one answer (or one leave) revokes form a
//     cohort: OnRevoked runs once for the cohort when its last shard is
//     done, and they are reported REVOKED together right after. Draining is bounded by 90% of
//     rebalanceTimeoutMs, counted from the heartbeat that revoked the
//     shard: then the records in flight are abandoned (their contexts
//     cancelled, their ACKs refused) so the coordinator never has to fence.
//  6. At most one read loop per shard: a shard starts again only after its
//     previous run's read loop has returned and its records in flight have
//     finished (or, after a fence, were cut off). A read loop started again
//     on the same run (its shard actor restarted after a panic) first
//     waits for the run's records in flight, which are still pending.
//  7. On a new shard the read loop reads this consumer's pending entries
//     first (XREADGROUP … 0, until an empty answer), then claims entries
//     idle for the claim min idle (XAUTOCLAIM), then reads new entries (>)
//     with BLOCK; it claims again every claim-min-idle. It reads the next
//     batch only when the previous one is finished, so a shard's records
//     are handled one at a time, in order. Each XREADGROUP and XAUTOCLAIM
//     is sent once (go-redis would send it again after a lost answer): a
//     failed read of new entries or claim, which Redis may have run, is
//     followed by a read of this consumer's pending entries.
//  8. UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH: ACKs and dispatch stop at
//     once on every shard (in-flight handlers' contexts are cancelled and
//     their ACKs fail with ErrFenced), OnRevoked runs, ownership is cleared
//     and the member rejoins with memberEpoch 0 once every read loop has
//     returned (a blocking read issued before the fence ends first, so
//     that no shard freed by the rejoin is still being read; it is
//     interrupted, rule 16). While a
//     handler still runs, the rejoin also waits until the lease of the last
//     answer has passed: the join frees the member's shards at once, and a
//     handler may not look at its context. So does the join of a member
//     actor restarted after a panic when handlers of the incarnation
//     before outlived its 10s wait for them.
//  9. Assignment lease: without a successful heartbeat (OK, SYNC_METADATA,
//     REVOKE_PENDING) for the member lease, counted from when that
//     heartbeat was sent, every shard stops reads and ACKs (ErrLeaseExpired)
//     until a later OK. Read loops and Ack check the lease themselves, and
//     a blocking read never blocks past it, so failing closed does not wait
//     for the heartbeat loop. The lease ends by whichever of the monotonic
//     and the wall clock ends it first (the monotonic clock stops while the
//     machine is suspended; the coordinator's lease does not), and a
//     shorter memberLeaseMs takes effect at the next successful answer.
//     A lease renewed by an answer the member applies after it ended (a
//     late answer, a busy actor, a wall-clock step) still lapsed: the
//     member stops every shard then, as the lease check does, and the OK
//     resumes them at once with new runs, which read their own pending
//     entries first (rule 7), so records whose hand-over or ACK the
//     lapse refused come back at once, not a claim min idle later.
//  10. Nothing is acknowledged for the handler. The exceptions: a
//     pending entry whose record was deleted from the stream comes back
//     without fields; it can never be handled and is acknowledged; and,
//     with WithDeadLetter, a record on its last allowed delivery whose
//     handler failed (or one delivered more often) is acknowledged once
//     it was added to the dead-letter stream.
//  11. Workers rotate: a shard with records ready waits in one FIFO queue, a
//     worker handles one record (a BatchHandler: every queued record) of
//     the head shard and requeues it at the tail, so no shard starves when
//     a member owns more shards than it has workers.
//  12. Hooks never run concurrently, not even across the members of one
//     Runtime; they run on the member's actor.
//  13. Leave (Run's context cancelled): stop reads on every shard, drain
//     (at most WithLeaveTimeout, then abandon), wait for every read loop
//     to return (even past the timeout: the leave frees the shards at
//     once; reads are interrupted, rule 16), heartbeat memberEpoch -1
//     reporting every shard REVOKED, return.
//  14. Redis first: a member sends its join only after Redis answered a
//     PING (probed with backoff until it does). When reads of one shard
//     fail WithRedisFailureLimit times in a row (3), the member gives
//     every shard back with a leave as in rule 13 and, once Redis answers
//     a PING again, joins anew. While reads fail they do not block, so a
//     frozen Redis is noticed in read timeouts, not BLOCK plus 10s each.
//  15. Retry in place (WithHandlerRetry): a failed handler call is made
//     again for the records it left unsettled, on the same worker, after a
//     growing delay, while the shard's later records wait (rule 7's
//     order holds); only after the last attempt are they left pending.
//     Retries stop when ACKs may no longer succeed (rules 5, 8, 9, 13).
//  16. A read in progress when a shard's run stops (revocation, leave,
//     fence, lapsed lease, abandoned drain) is cut short: each run sends
//     its reads on a connection of the shard's node that it keeps for its
//     life and whose CLIENT ID it knows, and the stop sends CLIENT UNBLOCK
//     of that id over another connection to the node, again until the
//     read loop has returned, so the read returns at once with no
//     entries; REVOKED, the rejoin of rule 8 and the leave of rule 13 wait
//     a few round trips, not WithBlock. A client that cannot give such a
//     connection (neither a *redis.Client nor one with MasterForKey, see
//     WithRedis) keeps the bounded read: the stop then waits up to
//     WithBlock, never past the lease (rule 9).
//  17. Acks are coalesced (WithAckBatch; WithSyncAcks(true) turns it
//     off): Ack and AckAll queue the acknowledgement, and one flusher per
//     member sends every shard's queue as one pipeline of XACKs; after a
//     full read, the shard's next read of new entries carries its
//     batch's XACK instead, in one pipeline that does not block. The gate
//     and the lease are checked again right before sending, so no ack
//     leaves after a revoke, a fence or a lapsed lease; a stopping shard
//     is drained only once its acks were sent (rule 5), so REVOKED and
//     the leave follow them.
//
// # Goroutines and who stops them
//
// Run's caller's goroutine runs the lifecycle. The actor system (stopped
// last by Run) runs one member actor per member, which owns: its workers
// (stopped after the member's ACK gates closed; one that ignores its
// cancelled context is left behind once WithLeaveTimeout has passed), its
// ack flusher (stopped after the workers), at most one heartbeat
// request goroutine (cancelled and waited for), its timers (stopped first)
// and one shard actor per run, each of which owns one read loop and its
// read connection (cancelled, a blocking read interrupted, and waited for
// when the shard actor stops; the loop closes the connection as it
// returns). [Runtime.Run] documents the
// shutdown order.
//
// # Non-goals
//
// Exactly-once processing (delivery is at-least-once), publishing (see
// package producer), and creating streams or Redis consumer groups.
// Authentication to the coordinator is supported (WithBasicAuth,
// WithBearerToken); Redis authentication and TLS are the Redis client's
// (see WithRedis).
package member
