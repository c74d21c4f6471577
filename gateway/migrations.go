package gateway

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

func (s *server) scaleStream(c *gin.Context) {
	var req protocol.ScaleRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.Scale(c.Request.Context(), c.Param("prefix"), req)
	s.answer(c, http.StatusAccepted, resp, err)
}

// scaleGroup is the reference design's per-group path. Shard keys are
// shared by every group of a stream, so it scales the whole stream (ours)
// and answers the migration as this group sees it.
func (s *server) scaleGroup(c *gin.Context) {
	var req protocol.ScaleRequest
	if !s.decodeBody(c, &req) {
		return
	}
	ctx, prefix, group := c.Request.Context(), c.Param("prefix"), c.Param("group")
	if _, err := s.coord.Group(ctx, prefix, group); err != nil {
		s.writeError(c, err)
		return
	}
	resp, err := s.coord.Scale(ctx, prefix, req)
	if err != nil {
		s.writeError(c, err)
		return
	}
	for i, name := range resp.AffectedConsumerGroups {
		if name == group {
			c.JSON(http.StatusAccepted, resp.Migrations[i])
			return
		}
	}
	// The group was deleted between the two calls; the stream scaled anyway.
	mig := protocol.Migration{}
	if len(resp.Migrations) > 0 {
		mig = resp.Migrations[0]
	}
	c.JSON(http.StatusAccepted, mig)
}

func (s *server) getMigration(c *gin.Context) {
	resp, err := s.coord.Migration(c.Request.Context(), c.Param("prefix"), c.Param("group"), c.Param("id"))
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) rollbackMigration(c *gin.Context) {
	var req protocol.OperatorRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.Rollback(c.Request.Context(), c.Param("prefix"), c.Param("group"), c.Param("id"), req)
	s.answer(c, http.StatusAccepted, resp, err)
}

func (s *server) completeMigration(c *gin.Context) {
	var req protocol.OperatorRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.Complete(c.Request.Context(), c.Param("prefix"), c.Param("id"), req)
	s.answer(c, http.StatusAccepted, resp, err)
}

func (s *server) migrations(c *gin.Context) {
	resp, err := s.coord.Migrations(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
}
