package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/protocol"
)

// auditTimeout bounds the audit write of one mutation. It does not use the
// request's context: a client that hangs up must not erase its trace.
const auditTimeout = 10 * time.Second

// auditBody is what an audit entry takes from an admin request body: the
// union of every admin body's fields.
type auditBody struct {
	InitialShardCount *int       `json:"initialShardCount"`
	TargetShardCount  *int       `json:"targetShardCount"`
	Force             *bool      `json:"force"`
	DeprecatedAfter   *time.Time `json:"deprecatedAfter"`
	RequestedBy       string     `json:"requestedBy"`
	Reason            string     `json:"reason"`
}

// audited records every admin mutation, allowed or refused, durably and
// in the log. The answer is held back until the entry is written, so a
// client never sees a change the audit log lacks. A failed audit write is
// logged and counted (rscoord_store_write_errors_total{kind="audit"}); the
// answer still goes out, since the change itself already happened.
func (s *server) audited(op protocol.AuditOperation) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		// Read the body once for its hash and values, and put it back for
		// the handler, which enforces the size limit (413) itself.
		body, _ := io.ReadAll(io.LimitReader(c.Request.Body, protocol.MaxBodyBytes+1))
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		orig := c.Writer
		held := &heldWriter{ResponseWriter: orig, status: http.StatusOK}
		c.Writer = held
		finished := false
		defer func() {
			c.Writer = orig
			if !finished {
				// A panic is on its way to the recovery handler, which
				// answers 500 on the real writer.
				s.recordAudit(c, op, start, body, http.StatusInternalServerError, protocol.CodeInternal)
			}
		}()
		c.Next()
		finished = true
		status := held.status
		var code protocol.ErrorCode
		if status >= 300 {
			var eb protocol.ErrorBody
			if json.Unmarshal(held.buf.Bytes(), &eb) == nil {
				code = eb.ErrorCode
			}
		}
		s.recordAudit(c, op, start, body, status, code)
		c.Writer = orig
		held.release()
	}
}

// recordAudit builds, logs and stores the entry of one mutation.
func (s *server) recordAudit(c *gin.Context, op protocol.AuditOperation, start time.Time, body []byte, status int, code protocol.ErrorCode) {
	var req auditBody
	if json.Unmarshal(body, &req) != nil {
		// A malformed body is audited with its hash only: the decoder may
		// have filled fields before it failed.
		req = auditBody{}
	}
	sum := sha256.Sum256(body)
	e := protocol.AuditEntry{
		Time: s.opts.Now().UTC(), Operation: op,
		StreamPrefix: c.Param("prefix"), ConsumerGroup: c.Param("group"), ReshardingID: c.Param("id"),
		Requested: protocol.AuditRequested{
			InitialShardCount: req.InitialShardCount, TargetShardCount: req.TargetShardCount,
			Force: req.Force, DeprecatedAfter: req.DeprecatedAfter,
		},
		RequestedBy: req.RequestedBy, Reason: req.Reason, Roles: []string{},
		RequestID: c.GetString(requestIDKey), ClientAddress: c.ClientIP(), UserAgent: c.Request.UserAgent(),
		Method: c.Request.Method, Route: c.FullPath(),
		DurationMs: float64(time.Since(start).Microseconds()) / 1000,
		BodySHA256: hex.EncodeToString(sum[:]),
		Result:     protocol.AuditResult{Outcome: protocol.AuditAccepted, Status: status, ErrorCode: code},
	}
	if p, ok := principal(c); ok {
		e.Principal, e.Roles, e.AuthMethod = p.Username, p.Roles.Names(), string(p.Method)
	}
	if status < 200 || status > 299 {
		e.Result.Outcome = protocol.AuditRefused
	}
	s.metrics.AdminMutation(op, status, code)
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	id, err := s.coord.RecordAudit(ctx, e)
	level := slog.LevelInfo
	if e.Result.Outcome == protocol.AuditRefused {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("auditId", id), slog.String("operation", string(op)), slog.String("outcome", e.Result.Outcome),
		slog.Int("status", status), slog.String("errorCode", string(code)),
		slog.String("stream", e.StreamPrefix), slog.String("group", e.ConsumerGroup), slog.String("reshardingId", e.ReshardingID),
		slog.String("principal", e.Principal), slog.Any("roles", e.Roles), slog.String("requestedBy", e.RequestedBy),
		slog.String("reason", e.Reason), slog.String("requestId", e.RequestID), slog.String("client", e.ClientAddress),
		slog.String("route", e.Route), slog.String("bodySha256", e.BodySHA256), slog.Float64("durationMs", e.DurationMs),
	}
	if err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.Any("error", err))
		s.log.LogAttrs(ctx, level, "audit entry NOT stored", attrs...)
		return
	}
	s.log.LogAttrs(ctx, level, "audit", attrs...)
}

// audit pages the audit log: GET /monitoring/audit?streamPrefix=&limit=&before=.
func (s *server) audit(c *gin.Context) {
	limit := 0
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			abortWith(c, protocol.CodeInvalidRequest, "limit must be a number")
			return
		}
		if n < 1 {
			abortWith(c, protocol.CodeInvalidRequest, "limit must be at least 1")
			return
		}
		limit = n
	}
	page, err := s.coord.Audit(c.Request.Context(), c.Query("streamPrefix"), c.Query("before"), limit)
	s.answer(c, http.StatusOK, page, err)
}

// heldWriter holds a response back (status, body) until release; headers
// go straight to the real writer's header map.
type heldWriter struct {
	gin.ResponseWriter
	status  int
	written bool
	buf     bytes.Buffer
}

func (w *heldWriter) WriteHeader(code int) {
	if code > 0 && !w.written {
		w.status = code
	}
}

func (w *heldWriter) WriteHeaderNow() { w.written = true }

func (w *heldWriter) Write(b []byte) (int, error) {
	w.written = true
	return w.buf.Write(b)
}

func (w *heldWriter) WriteString(s string) (int, error) {
	w.written = true
	return w.buf.WriteString(s)
}

func (w *heldWriter) Status() int { return w.status }

func (w *heldWriter) Size() int {
	if !w.written {
		return -1
	}
	return w.buf.Len()
}

func (w *heldWriter) Written() bool { return w.written }

// Flush is a no-op: the response is held until release.
func (w *heldWriter) Flush() {}

// release sends the held response on the real writer.
func (w *heldWriter) release() {
	w.ResponseWriter.WriteHeader(w.status)
	w.ResponseWriter.WriteHeaderNow()
	if w.buf.Len() > 0 {
		_, _ = w.ResponseWriter.Write(w.buf.Bytes()) // a client that went away is not our error
	}
}
