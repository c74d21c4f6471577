// Package membertest is the test kit of the member runtime for
// applications: it builds [member.Message] values whose Ack, AckDel, Nack,
// [member.AckAll] and [member.AckDelAll] are recorded instead of sent to
// Redis, so a [member.Handler] or [member.BatchHandler] is unit-tested
// without a Runtime, Redis or a coordinator.
//
//	rec := membertest.NewRecorder("orders")
//	msg := rec.Message(3, "1-0", map[string]string{"orderId": "42"})
//	err := handle(ctx, msg)
//	if rec.Outcome(msg.ID) != membertest.Acked { … }
//
// For tests against real components: package
// github.com/rscoord/rscoord/client/redistest starts real redis-server
// processes (standalone, a 3-master cluster, TLS) on free loopback ports
// and creates shard streams. An in-process coordinator is server code, so
// it lives in the server module as github.com/rscoord/rscoord/coordtest
// (a real coordinator on a Pebble directory behind an httptest server); a
// test that imports it brings the server module into the application's
// module graph, which is why it is not here. The other way is the rscoord
// binary (`rscoord serve --no-auth --listen 127.0.0.1:PORT --redis ADDR`),
// started by the test and stopped with SIGTERM.
package membertest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/rscoord/rscoord/client/member"
)

// Outcome is what a handler did with a record.
type Outcome int

const (
	// Pending: neither acknowledged nor nacked (the Runtime would leave it
	// pending, like a Nack).
	Pending Outcome = iota
	// Acked: Ack or AckAll succeeded.
	Acked
	// AckDeleted: AckDel or AckDelAll succeeded.
	AckDeleted
	// Nacked: Nack was called and no acknowledgement followed.
	Nacked
)

func (o Outcome) String() string {
	switch o {
	case Pending:
		return "pending"
	case Acked:
		return "acked"
	case AckDeleted:
		return "ackdeleted"
	case Nacked:
		return "nacked"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Recorder builds messages of one stream and records how each is settled.
// It is safe for concurrent use.
type Recorder struct {
	stream string

	mu       sync.Mutex
	outcomes map[string]Outcome // by entry id
	calls    []Call
	ackErr   error
}

// Call is one settling call a handler made.
type Call struct {
	// Op is "ack", "ackdel" or "nack"; AckAll and AckDelAll are one call
	// with every id.
	Op  string
	IDs []string
	// Err is what the call returned (set with FailAcks).
	Err error
}

// NewRecorder returns a Recorder for messages of stream prefix stream;
// a message of shard i has StreamKey "{stream}:{i}".
func NewRecorder(stream string) *Recorder {
	return &Recorder{stream: stream, outcomes: map[string]Outcome{}}
}

// Message builds a message of shard with entry id and fields (Redis
// values are strings, as go-redis decodes them), settled by r. Set
// MemberID, Redelivered, OwnerEpoch or Attempt on the result as the test
// needs.
func (r *Recorder) Message(shard int, id string, fields map[string]string) *member.Message {
	f := make(map[string]any, len(fields))
	for k, v := range fields {
		f[k] = v
	}
	r.mu.Lock()
	r.outcomes[id] = Pending
	r.mu.Unlock()
	return member.NewMessage(r, fmt.Sprintf("%s:%d", r.stream, shard), shard, id, f)
}

// FailAcks makes every later Ack, AckDel, AckAll and AckDelAll fail with
// an error wrapping err (member.ErrFenced, say), leaving the records
// unsettled; nil makes them succeed again.
func (r *Recorder) FailAcks(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ackErr = err
}

// Outcome is how the record with entry id was settled; Pending for an id
// the Recorder never built.
func (r *Recorder) Outcome(id string) Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[id]
}

// IDs are the ids of the records with outcome o, sorted.
func (r *Recorder) IDs(o Outcome) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, got := range r.outcomes {
		if got == o {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Calls are the settling calls in the order they were made.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Settle implements [member.Settler].
func (r *Recorder) Settle(_ context.Context, msgs []*member.Message, del bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Call{Op: "ack", IDs: make([]string, len(msgs)), Err: r.ackErr}
	if del {
		c.Op = "ackdel"
	}
	for i, m := range msgs {
		c.IDs[i] = m.ID
	}
	r.calls = append(r.calls, c)
	if r.ackErr != nil {
		return r.ackErr
	}
	for _, m := range msgs {
		if del {
			r.outcomes[m.ID] = AckDeleted
		} else if r.outcomes[m.ID] != AckDeleted {
			r.outcomes[m.ID] = Acked
		}
	}
	return nil
}

// Nack implements [member.Settler].
func (r *Recorder) Nack(m *member.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Call{Op: "nack", IDs: []string{m.ID}})
	if r.outcomes[m.ID] == Pending {
		r.outcomes[m.ID] = Nacked
	}
}
