package gateway

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// writeError answers err as a §3 error body. A *protocol.Error anywhere in
// the chain picks the status; anything else is the server's fault.
func (s *server) writeError(c *gin.Context, err error) {
	var perr *protocol.Error
	switch {
	case !errors.As(err, &perr):
		s.log.Error("request failed", slog.String("method", c.Request.Method),
			slog.String("path", c.FullPath()), slog.Any("error", err))
		perr = protocol.Errorf(protocol.CodeInternal, "the coordinator could not complete the request")
	case perr.Code.HTTPStatus() >= http.StatusInternalServerError && error(perr) != err:
		// A dependency failed (Redis, the store): the client gets the
		// code, the log keeps the cause.
		s.log.Warn("request failed on a dependency", slog.String("method", c.Request.Method),
			slog.String("path", c.FullPath()), slog.String("errorCode", string(perr.Code)), slog.Any("error", err))
	}
	abortWith(c, perr.Code, perr.Message)
}

// abortWith answers a §3 error body. Every 503 and 429 says when to come
// back: the dependency (store, Redis, the coordinator itself) is expected
// back, the limit to free up; but for REDIS_NOT_CONFIGURED, which no
// retry mends (the coordinator runs without --redis).
func abortWith(c *gin.Context, code protocol.ErrorCode, message string) {
	status := code.HTTPStatus()
	if c.Writer.Header().Get("Retry-After") == "" && code != protocol.CodeRedisNotConfigured {
		switch status {
		case http.StatusServiceUnavailable:
			c.Header("Retry-After", retryAfterUnavailable)
		case http.StatusTooManyRequests:
			// Limits that know better (rate windows) set their own.
			c.Header("Retry-After", retryAfterBusy)
		}
	}
	c.AbortWithStatusJSON(status, protocol.NewErrorBody(code, message))
}

// retryAfterUnavailable is the Retry-After of 503 answers, in seconds.
const retryAfterUnavailable = "2"

// retryAfterBusy is the Retry-After of a 429 whose limit does not say
// when room frees up (the large-body budget), in seconds.
const retryAfterBusy = "1"

// notFound answers unknown routes with a JSON body instead of gin's text.
func notFound(c *gin.Context) {
	abortWith(c, protocol.CodeNotFound, "no endpoint "+capField(c.Request.Method)+" "+capField(c.Request.URL.Path))
}

func methodNotAllowed(c *gin.Context) {
	abortWith(c, protocol.CodeMethodNotAllowed, "method "+capField(c.Request.Method)+" is not allowed on "+capField(c.Request.URL.Path))
}

// recovery turns a handler panic into a 500 error body, logged with the
// route, so that no client ever sees a dropped connection.
func (s *server) recovery(c *gin.Context, recovered any) {
	s.log.Error("handler panicked", slog.String("method", c.Request.Method),
		slog.String("path", c.FullPath()), slog.Any("panic", recovered))
	abortWith(c, protocol.CodeInternal, "the coordinator failed on this request")
}
