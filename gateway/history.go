package gateway

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// HistorySource answers the recent samples the metrics collection kept of
// a group; *collector.History implements it.
type HistorySource interface {
	Group(prefix, group string) protocol.HistoryResponse
}

// history answers a group's recent samples for the console's charts. The
// group must exist (404 otherwise, like every group route); a server
// without a history, or a group no collection round has read yet
// (without --redis, none ever is), answers empty lists.
func (s *server) history(c *gin.Context) {
	prefix, group := c.Param("prefix"), c.Param("group")
	if _, err := s.coord.Group(c.Request.Context(), prefix, group); err != nil {
		s.writeError(c, err)
		return
	}
	if s.opts.History == nil {
		c.JSON(http.StatusOK, protocol.HistoryResponse{StreamPrefix: prefix, ConsumerGroup: group, Tracked: true,
			Group: []protocol.HistorySample{}, Shards: []protocol.ShardHistory{}})
		return
	}
	c.JSON(http.StatusOK, s.opts.History.Group(prefix, group))
}
