package gateway

import (
	"context"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// Backend is what the gateway serves: the running coordinator
// (the coordinator of package actors implements it), or a fake in the
// handler tests.
// Its methods are safe for concurrent use. Errors meant for clients are
// *protocol.Error, possibly wrapped; any other error is the server's
// fault (500).
type Backend interface {
	Heartbeats
	Admin
	Monitoring
}

// Heartbeats is what the heartbeat route needs.
type Heartbeats interface {
	// Heartbeat runs one member heartbeat and always answers: a failure of
	// the coordinator itself is a RETRY answer, never an error.
	Heartbeat(ctx context.Context, prefix, group, memberID string, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse
	// HeartbeatBudget is how long answering req may take; the handler
	// keeps a held answer's write deadline past it.
	HeartbeatBudget(req *protocol.HeartbeatRequest) time.Duration
	// GroupConfig is the timing every group runs with: the intervals a
	// refusal the gateway answers itself carries.
	GroupConfig() assign.Config
}

// Admin is what the admin mutations and the audit log need.
type Admin interface {
	CreateStream(ctx context.Context, prefix string, req protocol.CreateRequest) (protocol.StreamResponse, error)
	CreateGroup(ctx context.Context, prefix, group string, req protocol.CreateRequest) (protocol.GroupResponse, error)
	DeleteGroup(ctx context.Context, prefix, group string, req protocol.DeleteGroupRequest) (protocol.GroupResponse, error)
	DeleteStream(ctx context.Context, prefix string, req protocol.DeleteStreamRequest) (protocol.DeleteStreamResponse, error)
	Scale(ctx context.Context, prefix string, req protocol.ScaleRequest) (protocol.ScaleResponse, error)
	Rollback(ctx context.Context, prefix, group, id string, req protocol.OperatorRequest) (protocol.Migration, error)
	Complete(ctx context.Context, prefix, id string, req protocol.OperatorRequest) (protocol.Migration, error)
	// ResetOffsets moves a group's last delivered id on the stream's
	// shards; a dry run unless req.Execute.
	ResetOffsets(ctx context.Context, prefix, group string, req protocol.OffsetsResetRequest) (protocol.OffsetsResetResponse, error)
	// RecordAudit appends entry to the durable audit log and returns its
	// id; Audit pages the log newest first.
	RecordAudit(ctx context.Context, entry protocol.AuditEntry) (string, error)
	Audit(ctx context.Context, streamPrefix, before string, limit int) (protocol.AuditPage, error)
}

// Monitoring is what the read-only routes, the probes and the held
// heartbeat gauges need.
type Monitoring interface {
	Health(ctx context.Context) protocol.Health
	// Ready is nil when the coordinator can serve requests now.
	Ready(ctx context.Context) error
	Groups(ctx context.Context) (protocol.GroupsResponse, error)
	Group(ctx context.Context, prefix, group string) (protocol.GroupResponse, error)
	Members(ctx context.Context, prefix, group string) (protocol.MembersResponse, error)
	Assignments(ctx context.Context, prefix, group string) (protocol.AssignmentsResponse, error)
	Consumption(ctx context.Context, prefix, group string) (protocol.ConsumptionResponse, error)
	Migrations(ctx context.Context, prefix, group string) (protocol.MigrationsResponse, error)
	Migration(ctx context.Context, prefix, group, id string) (protocol.Migration, error)
	// ProducerRouting may register an unknown group when mayRegister (the
	// gateway's judgement of the caller's roles) and auto-create allow.
	ProducerRouting(ctx context.Context, prefix, group string, mayRegister bool) (protocol.ProducerRoutingResponse, error)
	Shards(ctx context.Context, prefix, group string) (protocol.ShardsResponse, error)
	Offsets(ctx context.Context, prefix, group string) (protocol.OffsetsResponse, error)
	Messages(ctx context.Context, prefix, group string, shard int, cursor string, limit int, direction string) (protocol.MessagesResponse, error)
	// HeldHeartbeats and MaxHeldHeartbeats feed the held heartbeat gauges
	// (metrics.HeldSource).
	HeldHeartbeats() int64
	MaxHeldHeartbeats() int
}
