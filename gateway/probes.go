package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/internal/version"
)

// Probe answers. They carry no detail on purpose: the probes need no
// credentials, and why a server is not ready is in /monitoring/health
// (READ) and in the log.
const (
	probeUp       = "UP"
	probeReady    = "READY"
	probeNotReady = "NOT_READY"
)

// readyTimeout bounds one readiness check, so a hung store makes the probe
// answer 503 rather than time out.
const readyTimeout = 2 * time.Second

// healthz is the liveness probe: the process serves HTTP.
func healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": probeUp})
}

// readyz is the readiness probe: 200 when the coordinator can serve
// heartbeats (store open and Options.Ready, e.g. a certain cluster lease,
// satisfied), else 503. Redis is in the health answer, not here.
func (s *server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), readyTimeout)
	defer cancel()
	err := s.coord.Ready(ctx)
	if err == nil && s.opts.Ready != nil {
		err = s.opts.Ready(ctx)
	}
	if err != nil {
		s.log.Warn("readiness probe: not ready", slog.Any("error", err))
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": probeNotReady})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": probeReady})
}

// actuatorHealth answers as Spring Boot's /actuator/health does, for the
// reference design's probes: {"status":"UP"}, or 503 {"status":"DOWN"}
// when the coordinator cannot serve (readyz's check). No details, no
// credentials.
func (s *server) actuatorHealth(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), readyTimeout)
	defer cancel()
	err := s.coord.Ready(ctx)
	if err == nil && s.opts.Ready != nil {
		err = s.opts.Ready(ctx)
	}
	if err != nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "DOWN"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": probeUp})
}

// actuatorInfo answers as Spring Boot's /actuator/info does with build
// information: which build runs (READ, since a version helps an attacker
// pick an exploit).
func actuatorInfo(c *gin.Context) {
	v := version.Get()
	c.JSON(http.StatusOK, gin.H{"build": gin.H{"name": "rscoord", "version": v.Version, "revision": v.Revision, "goVersion": v.GoVersion}})
}
