package gateway

import (
	"github.com/gin-gonic/gin"
)

// metricsHandler serves the server's Prometheus registry.
func (s *server) metricsHandler(c *gin.Context) {
	s.metricsHTTP.ServeHTTP(c.Writer, c.Request)
}
