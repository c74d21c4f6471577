package gateway

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// Autoscaler is what the autoscale routes need (the coordinator of
// package actors implements it). A backend without it answers them 404.
type Autoscaler interface {
	// Autoscale answers a stream's policy (mode off when never set) and
	// its last decision.
	Autoscale(ctx context.Context, prefix string) (protocol.AutoscaleResponse, error)
	// SetAutoscale replaces a stream's policy, durably.
	SetAutoscale(ctx context.Context, prefix string, req protocol.AutoscaleRequest) (protocol.AutoscaleResponse, error)
}

func (s *server) autoscaler(c *gin.Context) (Autoscaler, bool) {
	a, ok := s.coord.(Autoscaler)
	if !ok {
		abortWith(c, protocol.CodeNotFound, "this coordinator has no autoscaling")
	}
	return a, ok
}

func (s *server) getAutoscale(c *gin.Context) {
	a, ok := s.autoscaler(c)
	if !ok {
		return
	}
	resp, err := a.Autoscale(c.Request.Context(), c.Param("prefix"))
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) putAutoscale(c *gin.Context) {
	a, ok := s.autoscaler(c)
	if !ok {
		return
	}
	var req protocol.AutoscaleRequest
	if !s.decodeBody(c, &req) {
		return
	}
	// The operator fields as every admin body has them (checkOperator).
	if req.RequestedBy != "" && strings.TrimSpace(req.RequestedBy) == "" {
		abortWith(c, protocol.CodeInvalidRequest, "requestedBy must name who asks for this change, not be blank")
		return
	}
	req.RequestedBy, req.Reason = capField(req.RequestedBy), capField(req.Reason)
	resp, err := a.SetAutoscale(c.Request.Context(), c.Param("prefix"), req)
	s.answer(c, http.StatusOK, resp, err)
}
