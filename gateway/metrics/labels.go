package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
)

// The label values every labelled metric can take. New starts each
// counter at 0 for all of them: a series that appears only at its first
// event makes rate() and increase() miss that event, and alert rules
// cannot tell "never happened" from "not exported".

func groupStates() []protocol.GroupState {
	return []protocol.GroupState{protocol.GroupEmpty, protocol.GroupAssigning, protocol.GroupReconciling, protocol.GroupStable}
}

// migrationStates are every state a migration can be in, exported at 0
// too.
func migrationStates() []protocol.MigrationState {
	return []protocol.MigrationState{protocol.MigrationPreparing, protocol.MigrationActive, protocol.MigrationDraining,
		protocol.MigrationDeprecated, protocol.MigrationRollingBack, protocol.MigrationRolledBack}
}

func heartbeatStatuses() []protocol.Status {
	return []protocol.Status{protocol.StatusOK, protocol.StatusRetry, protocol.StatusSyncMetadata, protocol.StatusRevokePending,
		protocol.StatusUnknownMemberID, protocol.StatusFencedMemberEpoch, protocol.StatusUnsupportedProtocol, protocol.StatusInvalidRequest}
}

func stepKinds() []string {
	return []string{actors.StepHeartbeat, actors.StepTick, actors.StepLayout, actors.StepRestore, actors.StepHeldAnswer}
}

// storeKinds are the record kinds of [actors.Observer.StoreWrite].
func storeKinds() []string { return []string{"group", "stream", "audit"} }

func auditOperations() []protocol.AuditOperation {
	return []protocol.AuditOperation{protocol.AuditCreateStream, protocol.AuditCreateGroup, protocol.AuditDeleteGroup, protocol.AuditDeleteStream,
		protocol.AuditScale, protocol.AuditRollback, protocol.AuditCompleteMigration, protocol.AuditResetOffsets}
}

func errorCodes() []protocol.ErrorCode {
	return []protocol.ErrorCode{protocol.CodeInvalidRequest, protocol.CodeUnauthorized, protocol.CodeForbidden, protocol.CodeNotFound,
		protocol.CodeMethodNotAllowed, protocol.CodeStreamNotFound, protocol.CodeGroupNotFound, protocol.CodeMigrationNotFound,
		protocol.CodeGroupAlreadyExists, protocol.CodeStreamPrefixAlreadyExists, protocol.CodeActiveMigrationExists,
		protocol.CodeMetadataSyncInProgress, protocol.CodeGroupHasActiveMembers, protocol.CodeStreamHasGroups, protocol.CodeOffsetsResetInProgress,
		protocol.CodeRollbackNotAllowed,
		protocol.CodePayloadTooLarge, protocol.CodeUnsupportedMediaType, protocol.CodeRateLimitExceeded,
		protocol.CodeRedisNotConfigured, protocol.CodeRedisStreamProvisioningFailed, protocol.CodeCoordinatorTerminating,
		protocol.CodeStoreUnavailable, protocol.CodeRedisUnavailable, protocol.CodeMemberLimitReached, protocol.CodeMemberIDInUse, protocol.CodeGroupLimitReached,
		protocol.CodeInternal}
}

// The limiters of rscoord_rate_limit_refusals_total: admin mutations per
// principal, failed logins, logouts per user, and large request bodies
// past the server's body-memory budget.
const (
	LimiterAdmin      = "admin"
	LimiterLogin      = "login"
	LimiterLogout     = "logout"
	LimiterBodyMemory = "body_memory"
)

// RateLimiters lists every limiter label of rscoord_rate_limit_refusals_total.
func RateLimiters() []string {
	return []string{LimiterAdmin, LimiterLogin, LimiterLogout, LimiterBodyMemory}
}

// initLabels creates every labelled counter's series at 0.
func (m *Metrics) initLabels() {
	m.heartbeatStatus = map[protocol.Status]prometheus.Counter{}
	for _, st := range heartbeatStatuses() {
		m.heartbeatStatus[st] = m.heartbeats.WithLabelValues(string(st))
	}
	m.stepSeries = map[string][2]prometheus.Counter{}
	for _, k := range stepKinds() {
		m.stepSeries[k] = [2]prometheus.Counter{m.groupSteps.WithLabelValues(k, "false"), m.groupSteps.WithLabelValues(k, "true")}
	}
	for _, k := range storeKinds() {
		m.storeWriteErrors.WithLabelValues(k)
		m.storeWriteDuration.WithLabelValues(k)
	}
	m.routing.WithLabelValues("OK")
	for _, code := range errorCodes() {
		m.routing.WithLabelValues(string(code))
	}
	for _, op := range auditOperations() {
		m.adminMutations.WithLabelValues(string(op), protocol.AuditAccepted)
		m.adminMutations.WithLabelValues(string(op), protocol.AuditRefused)
		for _, code := range errorCodes() {
			m.adminFailures.WithLabelValues(string(op), string(code))
		}
	}
	for _, l := range RateLimiters() {
		m.rateLimited.WithLabelValues(l)
	}
	for _, st := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		m.authRefused.WithLabelValues(strconv.Itoa(st))
	}
}
