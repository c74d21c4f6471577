package gateway

import (
	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// Bounds of the admin rate limiter's memory. One principal holds at most
// adminGroupsPerPrincipal windows (groups or streams) at once, each of at
// most Options.AdminRateLimit mutations; past that it is refused new
// groups itself, never anyone else. adminMaxWindows, the whole table,
// holds the budgets of 100 principals at once (about 70 MB at most, keys
// cut by limitedName); should more fill it, a principal within its budget
// changes a new group uncounted rather than being refused for the others'
// windows. docs/operations.md gives these numbers.
const (
	adminGroupsPerPrincipal = 1000
	adminMaxWindows         = 100 * adminGroupsPerPrincipal
)

// rateLimitAdmin limits admin mutations per principal and group (per
// stream for stream-wide operations) in fixed windows: past the limit, or
// past the principal's budget of groups, the answer is 429
// RATE_LIMIT_EXCEEDED with Retry-After. It runs after authorization, so
// only authenticated callers are counted, and never on heartbeats or
// reads.
func (s *server) rateLimitAdmin(c *gin.Context) {
	p, _ := principal(c)
	v := s.adminLimit.TakeOwned(p.Username, limitedName(c.Param("prefix"))+"\x00"+limitedName(c.Param("group")))
	if v.OK {
		c.Next()
		return
	}
	s.metrics.RateLimited(metrics.LimiterAdmin)
	if v.OverBudget {
		tooMany(c, "too many groups changed by this user in the rate window; retry later", v.RetryAfter)
		return
	}
	tooMany(c, "too many admin changes to this group; retry later", v.RetryAfter)
}

// limitedName is what the admin limiter keeps of a name from the path: at
// most one byte past the longest valid name. The limiter runs before the
// handler refuses a name too long, and a path may be as long as the
// request's headers; names that agree that far are all invalid, and
// sharing one window costs them nothing.
func limitedName(name string) string {
	if len(name) > protocol.MaxNameLength {
		return name[:protocol.MaxNameLength+1]
	}
	return name
}
