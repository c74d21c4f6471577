package gateway

import (
	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/gateway/metrics"
)

// rateLimitAdmin limits admin mutations per principal and group (per
// stream for stream-wide operations) in fixed windows: past the limit the
// answer is 429 RATE_LIMIT_EXCEEDED with Retry-After. It runs after
// authorization, so only authenticated callers are counted, and never on
// heartbeats or reads.
func (s *server) rateLimitAdmin(c *gin.Context) {
	p, _ := principal(c)
	key := p.Username + "\x00" + c.Param("prefix") + "\x00" + c.Param("group")
	if ok, retry := s.adminLimit.Take(key); !ok {
		s.metrics.RateLimited(metrics.LimiterAdmin)
		tooMany(c, "too many admin changes to this group; retry later", retry)
		return
	}
	c.Next()
}
