package bench

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// BaselineHandler is the ceiling a heartbeat can reach on this machine: a
// bare gin route that decodes a heartbeat-shaped body and answers a
// heartbeat-shaped response, with no coordination behind it. A request
// with waitMs is answered once that wait is over (at most a minute), as a
// coordinator holds a steady member's heartbeat.
func BaselineHandler() http.Handler {
	r := gin.New()
	r.POST(protocol.BasePath+"/streams/:prefix/groups/:group/members/:member/heartbeat", func(c *gin.Context) {
		var req protocol.HeartbeatRequest
		if err := c.ShouldBindJSON(&req); err != nil {
			c.JSON(http.StatusBadRequest, protocol.NewErrorBody(protocol.CodeInvalidRequest, err.Error()))
			return
		}
		if req.WaitMs > 0 {
			t := time.NewTimer(min(time.Duration(req.WaitMs)*time.Millisecond, time.Minute))
			select {
			case <-t.C:
			case <-c.Request.Context().Done():
				t.Stop()
			}
		}
		c.JSON(http.StatusOK, protocol.HeartbeatResponse{
			ResponseTo: req.RequestID, Status: protocol.StatusOK, MemberID: req.MemberID,
			MemberEpoch: req.MemberEpoch, HeartbeatIntervalMs: 3000, RebalanceTimeoutMs: 60000,
			GroupEpoch: req.MemberEpoch, AssignmentEpoch: req.MemberEpoch, MetadataVersion: req.MetadataVersion,
			Assignment: protocol.Assignment{AssignedShards: req.OwnedShards, PendingShards: []protocol.Shard{},
				MetadataVersion: req.MetadataVersion},
		})
	})
	return r
}
