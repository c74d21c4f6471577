package gateway

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
)

func (s *server) createStream(c *gin.Context) {
	var req protocol.CreateRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.CreateStream(c.Request.Context(), c.Param("prefix"), req)
	s.answer(c, http.StatusCreated, resp, err)
}

// deleteStream deletes a stream (ours).
func (s *server) deleteStream(c *gin.Context) {
	var req protocol.DeleteStreamRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.DeleteStream(c.Request.Context(), c.Param("prefix"), req)
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) createGroup(c *gin.Context) {
	var req protocol.CreateRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.CreateGroup(c.Request.Context(), c.Param("prefix"), c.Param("group"), req)
	s.answer(c, http.StatusCreated, resp, err)
}

func (s *server) getGroup(c *gin.Context) {
	resp, err := s.coord.Group(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) deleteGroup(c *gin.Context) {
	var req protocol.DeleteGroupRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.DeleteGroup(c.Request.Context(), c.Param("prefix"), c.Param("group"), req)
	s.answer(c, http.StatusOK, resp, err)
}

// forcedResetWriteSlack is how long a forced offsets reset's answer may
// take beyond the hand-off bound: the reset itself and the audit write.
const forcedResetWriteSlack = 30 * time.Second

// resetOffsets plans or applies an offsets reset (ours): 200 either way,
// the answer's executed saying which.
func (s *server) resetOffsets(c *gin.Context) {
	var req protocol.OffsetsResetRequest
	if !s.decodeBody(c, &req) {
		return
	}
	if req.Force && req.Execute {
		// A forced reset waits for the shards' readers to hand them off,
		// at most the hand-off bound: its answer may come after the
		// server's write timeout.
		rc := http.NewResponseController(c.Writer)
		_ = rc.SetWriteDeadline(time.Now().Add(s.coord.GroupConfig().HandOffBound() + forcedResetWriteSlack))
	}
	resp, err := s.coord.ResetOffsets(c.Request.Context(), c.Param("prefix"), c.Param("group"), req)
	s.answer(c, http.StatusOK, resp, err)
}

// producerRouting answers a producer's routing. Only a caller that could
// join the group or create it (MEMBER, WRITE, ADMIN) may have an unknown
// group registered on the fly: a registration is durable, provisions a
// Redis consumer group on every shard (which a scale-in's drain proof
// counts), and a READ or MONITOR credential, a dashboard's, must change
// nothing.
func (s *server) producerRouting(c *gin.Context) {
	prefix := c.Param("prefix")
	p, _ := principal(c)
	mayRegister := p.AllowedOn(auth.PermMember, prefix) || p.AllowedOn(auth.PermWrite, prefix)
	resp, err := s.coord.ProducerRouting(c.Request.Context(), prefix, c.Param("group"), mayRegister)
	var code protocol.ErrorCode
	if err != nil {
		code = protocol.CodeInternal
		var perr *protocol.Error
		if errors.As(err, &perr) {
			code = perr.Code
		}
	}
	s.metrics.ProducerRouting(code)
	s.answer(c, http.StatusOK, resp, err)
}
