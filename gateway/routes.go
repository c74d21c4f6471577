package gateway

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
)

const (
	heartbeatRoute = protocol.BasePath + "/streams/:prefix/groups/:group/members/:member/heartbeat"
	routingRoute   = protocol.BasePath + "/streams/:prefix/groups/:group/producer-routing"
	pprofRoute     = "/debug/pprof/*profile"
)

// route is one endpoint: what it needs and what it does.
type route struct {
	method, path string
	// perm is the permission the caller needs; 0 means none (no
	// credentials are looked at).
	perm auth.Permission
	// op marks an admin mutation: audited and rate limited.
	op      protocol.AuditOperation
	handler gin.HandlerFunc
}

// routes is every endpoint the server serves (docs/protocol.md §5). The OpenAPI
// document (openapi.yaml) must list exactly these; a test checks it.
func (s *server) routes() []route {
	const b = protocol.BasePath
	heartbeatPerm := auth.PermMember
	if s.opts.NoMemberAuth {
		heartbeatPerm = 0
	}
	metricsPerm := auth.PermRead
	if s.opts.MetricsPublic {
		metricsPerm = 0
	}
	read, write := auth.PermRead, auth.PermWrite
	consolePage := consolePage()
	explorer := explorerPage()
	return []route{
		{http.MethodPost, b + "/auth/login", 0, "", s.login},
		{http.MethodPost, b + "/auth/logout", 0, "", s.logout},
		{http.MethodPost, b + "/auth/tokens", auth.PermAdmin, protocol.AuditCreateAPIToken, s.createAPIToken},
		{http.MethodGet, b + "/auth/tokens", auth.PermAdmin, "", s.listAPITokens},
		{http.MethodDelete, b + "/auth/tokens/:name", auth.PermAdmin, protocol.AuditRevokeAPIToken, s.revokeAPIToken},

		{http.MethodPost, b + "/streams/:prefix", write, protocol.AuditCreateStream, s.createStream},
		{http.MethodDelete, b + "/streams/:prefix", write, protocol.AuditDeleteStream, s.deleteStream},
		{http.MethodPost, b + "/streams/:prefix/scale", write, protocol.AuditScale, s.scaleStream},
		{http.MethodPost, b + "/streams/:prefix/migrations/:id/complete", write, protocol.AuditCompleteMigration, s.completeMigration},
		{http.MethodGet, b + "/streams/:prefix/autoscale", read, "", s.getAutoscale},
		{http.MethodPut, b + "/streams/:prefix/autoscale", auth.PermAdmin, protocol.AuditSetAutoscale, s.putAutoscale},
		{http.MethodPost, b + "/streams/:prefix/groups/:group", write, protocol.AuditCreateGroup, s.createGroup},
		{http.MethodGet, b + "/streams/:prefix/groups/:group", read, "", s.getGroup},
		{http.MethodDelete, b + "/streams/:prefix/groups/:group", write, protocol.AuditDeleteGroup, s.deleteGroup},
		{http.MethodPost, b + "/streams/:prefix/groups/:group/offsets/reset", write, protocol.AuditResetOffsets, s.resetOffsets},
		{http.MethodGet, routingRoute, auth.PermRouting, "", s.producerRouting},
		{http.MethodPost, b + "/streams/:prefix/groups/:group/scale", write, protocol.AuditScale, s.scaleGroup},
		{http.MethodGet, b + "/streams/:prefix/groups/:group/migrations/:id", read, "", s.getMigration},
		{http.MethodPost, b + "/streams/:prefix/groups/:group/migrations/:id/rollback", write, protocol.AuditRollback, s.rollbackMigration},
		{http.MethodPost, heartbeatRoute, heartbeatPerm, "", s.heartbeat},

		{http.MethodGet, b + "/monitoring/health", read, "", s.health},
		{http.MethodGet, b + "/monitoring/session", read, "", s.session},
		{http.MethodGet, b + "/monitoring/compatibility", read, "", s.compatibility},
		{http.MethodGet, b + "/monitoring/cluster", read, "", s.cluster},
		{http.MethodGet, b + "/monitoring/groups", read, "", s.listGroups},
		{http.MethodGet, b + "/monitoring/audit", read, "", s.audit},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group", read, "", s.getGroup},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/members", read, "", s.members},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/assignments", read, "", s.assignments},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/consumption", read, "", s.consumption},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/migrations", read, "", s.migrations},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/shards", read, "", s.shards},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/offsets", read, "", s.offsets},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/history", read, "", s.history},
		{http.MethodGet, b + "/monitoring/streams/:prefix/groups/:group/shards/:shard/messages", read, "", s.messages},

		{http.MethodGet, b + "/monitoring/grafana/groups", read, "", s.grafanaGroups},
		{http.MethodGet, b + "/monitoring/grafana/members", read, "", s.grafanaMembers},
		{http.MethodGet, b + "/monitoring/grafana/assignments", read, "", s.grafanaAssignments},
		{http.MethodGet, b + "/monitoring/grafana/shards", read, "", s.grafanaShards},
		{http.MethodGet, b + "/monitoring/grafana/messages", read, "", s.grafanaMessages},
		{http.MethodGet, b + "/monitoring/grafana/options/streams", read, "", s.grafanaStreamOptions},
		{http.MethodGet, b + "/monitoring/grafana/options/consumer-groups", read, "", s.grafanaGroupOptions},
		{http.MethodGet, b + "/monitoring/grafana/options/shards", read, "", s.grafanaShardOptions},

		{http.MethodGet, "/metrics", metricsPerm, "", s.metricsHandler},
		{http.MethodGet, "/actuator/prometheus", metricsPerm, "", s.metricsHandler},
		{http.MethodGet, "/openapi.yaml", 0, "", serveOpenAPI},
		// Runtime profiles show the whole process: ADMIN only.
		{http.MethodGet, pprofRoute, auth.PermAdmin, "", s.servePprof},
		// Probes need no credentials and answer no details. Some load
		// balancers probe with HEAD: the same answer, its body dropped by
		// net/http (gin routes HEAD only where told to).
		{http.MethodGet, "/healthz", 0, "", healthz},
		{http.MethodHead, "/healthz", 0, "", healthz},
		{http.MethodGet, "/readyz", 0, "", s.readyz},
		{http.MethodHead, "/readyz", 0, "", s.readyz},
		// The console page needs no credentials: every call it makes
		// carries the token its sign-in obtained.
		{http.MethodGet, "/console", 0, "", consolePage},
		{http.MethodGet, "/console/*file", 0, "", consolePage},
		// The reference design's operators' paths: the API explorer, the
		// document as JSON and Spring Boot's actuator probes.
		{http.MethodGet, "/scalar", 0, "", explorer},
		{http.MethodGet, "/swagger-ui.html", 0, "", explorer},
		{http.MethodGet, "/swagger-ui/*file", 0, "", explorer},
		{http.MethodGet, "/v3/api-docs", 0, "", serveOpenAPIJSON()},
		{http.MethodGet, "/actuator/health", 0, "", s.actuatorHealth},
		{http.MethodGet, "/actuator/info", read, "", actuatorInfo},
	}
}

// chain is the handler chain of rt: for admin mutations audit (outermost,
// so that refusals are recorded too), then the cross-origin check
// (sameOriginOnly), then credentials and role, then the rate limit, then
// the handler.
func (s *server) chain(rt route) []gin.HandlerFunc {
	var out []gin.HandlerFunc
	if rt.op != "" {
		out = append(out, s.audited(rt.op))
	}
	if sameOriginOnly(rt) {
		out = append(out, s.crossOrigin)
	}
	if rt.perm != 0 {
		out = append(out, s.authorize(rt.perm))
	}
	if rt.op != "" {
		out = append(out, s.rateLimitAdmin)
	}
	return append(out, rt.handler)
}

// sameOriginOnly reports whether browsers' cross-origin requests to rt are
// refused (crossOrigin): every method but GET and HEAD, and the GETs that
// cost or change something, which any page can make a browser send with
// its cached credentials through an <img> tag. The runtime profiles hold
// the process's one profiler for seconds (or force a collection); the
// producer routing may register its group (--auto-create-groups). Other
// GETs only read, and no page of another origin can read their answers.
func sameOriginOnly(rt route) bool {
	if rt.method != http.MethodGet && rt.method != http.MethodHead {
		return true
	}
	return rt.path == pprofRoute || rt.path == routingRoute
}
