package gateway

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

func (s *server) createStream(c *gin.Context) {
	var req protocol.CreateRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.CreateStream(c.Request.Context(), c.Param("prefix"), req)
	s.answer(c, http.StatusCreated, resp, err)
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

func (s *server) producerRouting(c *gin.Context) {
	resp, err := s.coord.ProducerRouting(c.Request.Context(), c.Param("prefix"), c.Param("group"))
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
