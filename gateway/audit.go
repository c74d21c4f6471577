package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// auditTimeout bounds the audit write of one mutation. It does not use the
// request's context: a client that hangs up must not erase its trace.
const auditTimeout = 10 * time.Second

// auditBody is what an audit entry takes from an admin request body: the
// union of every admin body's fields.
type auditBody struct {
	InitialShardCount *int     `json:"initialShardCount"`
	TargetShardCount  *int     `json:"targetShardCount"`
	Force             *bool    `json:"force"`
	DeleteKeys        *bool    `json:"deleteKeys"`
	DeprecatedAfter   *utcTime `json:"deprecatedAfter"`
	RequestedBy       string   `json:"requestedBy"`
	Reason            string   `json:"reason"`
}

// audited records every admin mutation, allowed or refused, durably and
// in the log. The answer is held back until the entry is written, so a
// client never sees a change the audit log lacks. A failed audit write is
// logged and counted (rscoord_store_write_errors_total{kind="audit"}); the
// answer still goes out, since the change itself already happened.
func (s *server) audited(op protocol.AuditOperation) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		// Keep what the handler reads of the body (it enforces the size
		// limit itself). A request refused before the handler (401, 403,
		// 429) is never read, so it is audited without its body.
		captured := &captureBody{ReadCloser: c.Request.Body}
		c.Request.Body = captured
		orig := c.Writer
		held := &heldWriter{ResponseWriter: orig, status: http.StatusOK}
		c.Writer = held
		finished := false
		defer func() {
			c.Writer = orig
			if !finished {
				// A panic is on its way to the recovery handler, which
				// answers 500 on the real writer.
				s.recordAudit(c, op, start, captured.buf.Bytes(), http.StatusInternalServerError, protocol.CodeInternal)
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
		s.recordAudit(c, op, start, captured.buf.Bytes(), status, code)
		c.Writer = orig
		held.release()
	}
}

// captureBody keeps what is read of a request body.
type captureBody struct {
	io.ReadCloser
	buf bytes.Buffer
}

func (b *captureBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	return n, err
}

// refusedBeforeHandler reports statuses the gateway answers before a
// handler reads the body: credentials, roles, rate limits.
func refusedBeforeHandler(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusTooManyRequests
}

// recordAudit builds, logs and stores the entry of one mutation. Every
// string taken from the request is capped (capField). Entries of requests
// refused before their handler are rate limited per client address (and
// overall): past the limit they are counted in the refusal metrics only.
func (s *server) recordAudit(c *gin.Context, op protocol.AuditOperation, start time.Time, body []byte, status int, code protocol.ErrorCode) {
	if refusedBeforeHandler(status) {
		body = nil
		if ok, _ := s.refusedAudit.Take(c.ClientIP()); !ok {
			s.refusedAuditSuppressed(c)
			return
		}
		if ok, _ := s.refusedAuditAll.Take(""); !ok {
			s.refusedAuditSuppressed(c)
			return
		}
	}
	var req auditBody
	if decodeJSON(body, &req) != nil {
		// A malformed body is audited with its hash only: the decoder may
		// have filled fields before it failed.
		req = auditBody{}
	}
	bodyHash := ""
	if body != nil {
		sum := sha256.Sum256(body)
		bodyHash = hex.EncodeToString(sum[:])
	}
	e := protocol.AuditEntry{
		Time: s.opts.Now().UTC(), Operation: op,
		StreamPrefix: capField(c.Param("prefix")), ConsumerGroup: capField(c.Param("group")), ReshardingID: capField(c.Param("id")),
		Requested: protocol.AuditRequested{
			InitialShardCount: req.InitialShardCount, TargetShardCount: req.TargetShardCount,
			Force: req.Force, DeleteKeys: req.DeleteKeys, DeprecatedAfter: req.DeprecatedAfter.ptr(),
		},
		RequestedBy: capField(req.RequestedBy), Reason: capField(req.Reason), Roles: []string{},
		RequestID: requestIDOf(c), ClientAddress: c.ClientIP(), UserAgent: capField(c.Request.UserAgent()),
		Method: c.Request.Method, Route: c.FullPath(),
		DurationMs: float64(time.Since(start).Microseconds()) / 1000,
		BodySHA256: bodyHash,
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
	if refusedBeforeHandler(status) {
		// Refused credentials repeat at the client's rate: their entries are stored, their lines logged once per address and status a minute.
		s.refusedLog.LogAttrs(ctx, level, "audit", e.ClientAddress+"\x00"+strconv.Itoa(status), attrs...)
		return
	}
	s.log.LogAttrs(ctx, level, "audit", attrs...)
}

// refusedAuditSuppressed notes an audit entry of a refused request that
// the rate limit dropped: a warning at most once per window.
func (s *server) refusedAuditSuppressed(c *gin.Context) {
	if ok, _ := s.refusedAuditWarn.Take(""); ok {
		s.log.Warn("audit entries of refused requests are being dropped (rate limited); refusals are still counted in rscoord_auth_refusals_total and rscoord_rate_limit_refusals_total",
			slog.String("client", c.ClientIP()))
	}
}

// maxFieldBytes caps every string an audit entry or log line takes from a
// request.
const maxFieldBytes = 1024

// capField cuts v to maxFieldBytes (at a rune boundary), marked as cut.
func capField(v string) string {
	if len(v) <= maxFieldBytes {
		return v
	}
	cut := maxFieldBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + fmt.Sprintf("…[cut %d bytes]", len(v)-cut)
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

// Unwrap lets http.ResponseController reach the connection (a handler that
// moves its write deadline).
func (w *heldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
