package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// heartbeat answers 200 with a status for everything but a body that is
// not JSON at all (400), too large (413), or large while the large-body
// budget is full (429, see bodyMemory): any other non-2xx would stop
// the reference Python client's member thread. The content type is not
// checked, for the same reason (readBodyInto). The body is read into a
// pooled buffer and decoded once.
func (s *server) heartbeat(c *gin.Context) {
	start := time.Now()
	buf := s.bodies.buffer()
	defer s.bodies.recycle(buf)
	body, perr := s.readBodyInto(c, maxHeartbeatBodyBytes, buf)
	if perr != nil {
		abortWith(c, perr.Code, perr.Message)
		return
	}
	var req protocol.HeartbeatRequest
	problem, perr := s.decodeHeartbeat(body, &req)
	if perr != nil {
		abortWith(c, perr.Code, perr.Message)
		return
	}
	if problem != "" {
		// Well-formed JSON the protocol refuses is the client's bug, told
		// the protocol's way.
		resp := assign.Invalid(problem).Answer(&req, s.coord.GroupConfig())
		s.metrics.Heartbeat(resp.Status, false, time.Since(start))
		s.writeHeartbeat(c, &resp)
		return
	}
	if req.WaitMs > 0 {
		if release, ok := holdConnection(c.Request.Context()); ok {
			defer release()
			// A held answer (waitMs) legitimately takes up to the wait:
			// the server's write timeout, counted from the request (over
			// HTTP/2, from the stream's), must not cut it. The deadline
			// moves past the longest the coordinator may take.
			rc := http.NewResponseController(c.Writer)
			_ = rc.SetWriteDeadline(time.Now().Add(s.coord.HeartbeatBudget(&req) + heldWriteSlack))
		} else {
			// Every connection held answers may keep busy is: answered
			// at once, as past the coordinator's own cap.
			req.WaitMs = 0
		}
	}
	// Where the member runs, for the members API; the group actor stores
	// it only when it changed.
	ctx := actors.WithOrigin(c.Request.Context(), actors.Origin{Address: s.clientIP(c), UserAgent: c.Request.UserAgent()})
	resp := s.coord.Heartbeat(ctx, c.Param("prefix"), c.Param("group"), c.Param("member"), &req)
	s.metrics.Heartbeat(resp.Status, req.WaitMs > 0, time.Since(start))
	s.metrics.GroupHeartbeat(c.Param("prefix"), c.Param("group"), resp.Status)
	s.writeHeartbeat(c, &resp)
}

// writeHeartbeat writes resp as the 200 answer, encoded once into a
// pooled buffer and sent in one write with its Content-Length. Its bytes
// are those c.JSON writes. An answer that fits net/http's buffer before
// chunking gets its Content-Length from net/http itself, which writes it
// without allocating when the handler returns; a longer one (a member
// owning many shards) gets it here, so that it is not sent chunked.
func (s *server) writeHeartbeat(c *gin.Context, resp *protocol.HeartbeatResponse) {
	buf := s.bodies.buffer()
	defer s.bodies.recycle(buf)
	if err := json.NewEncoder(buf).Encode(resp); err != nil {
		s.writeError(c, fmt.Errorf("encode the heartbeat answer: %w", err))
		return
	}
	buf.Truncate(buf.Len() - 1) // the newline Encode adds
	h := c.Writer.Header()
	h["Content-Type"] = s.jsonContentType
	if buf.Len() > answerBufferBytes {
		h.Set("Content-Length", strconv.Itoa(buf.Len()))
	}
	c.Writer.WriteHeader(http.StatusOK)
	_, _ = c.Writer.Write(buf.Bytes())
}

// decodeHeartbeat decodes a heartbeat body into req in one pass. A body
// that is not JSON at all is perr (400). Well-formed JSON that the
// protocol refuses (a field of the wrong type, a member named twice) is a
// problem, answered INVALID_REQUEST in a 200, with req holding what did
// decode. Member names match exactly (decodeJSON's rules).
//
// The informational report times (shardProgress[].updatedAt,
// revokingShards[].ackedAt) that do not parse as RFC 3339 (a zone-less
// timestamp, a number) are dropped rather than refused: the reference
// clients send such values, a non-2xx would stop them, and those times
// decide nothing (reportTimes).
//
// A body first gets the stricter and cheaper decoding of
// go-json-experiment's own semantics (heartbeatFastOptions): a
// well-formed heartbeat decodes there to the same request, in about two
// thirds of the CPU. Anything it refuses is decoded again from scratch
// with the legacy options, whose answer (the request, or the problem) is
// then the one given.
func (s *server) decodeHeartbeat(body []byte, req *protocol.HeartbeatRequest) (problem string, perr *protocol.Error) {
	if jsonv2.Unmarshal(body, req, s.heartbeatFast) == nil {
		return "", nil
	}
	*req = protocol.HeartbeatRequest{}
	err := jsonv2.Unmarshal(body, req, s.heartbeatJSON)
	if err == nil {
		return "", nil
	}
	// Legacy semantics check the whole body's syntax before decoding any
	// of it: a syntax error is the body's first problem, and the only one
	// told.
	var syntax *jsonv1.SyntaxError
	switch {
	case errors.As(err, &syntax) && syntax.Error() == jsontext.ErrDuplicateName.Error():
		return "a member name appears twice in one object of the heartbeat body", nil
	case syntax != nil:
		return "", protocol.Errorf(protocol.CodeInvalidRequest, "malformed heartbeat JSON: "+jsonProblem(err))
	default:
		return "heartbeat body: " + jsonProblem(err), nil
	}
}

// heartbeatOptions are how decodeHeartbeat reads a body: decodeJSON's
// rules, with the report times read by reportTimes. New builds them once.
func heartbeatOptions() jsonv2.Options {
	return jsonv2.JoinOptions(decodeOptions(), jsonv2.WithUnmarshalers(reportTimes()))
}

// heartbeatFastOptions are decodeHeartbeat's first try: names matched
// exactly and never twice, as decodeJSON's rules, and the report times
// read by reportTimes, under go-json-experiment's own semantics (no
// syntax pass over the whole body before decoding, no legacy merging).
func heartbeatFastOptions() jsonv2.Options {
	return jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(false), jsontext.AllowDuplicateNames(false),
		jsonv2.WithUnmarshalers(reportTimes()))
}

// reportTimes read the heartbeat's report times: an RFC 3339 string is the
// time; anything else (a zone-less timestamp, a number, an object) is no
// time, the zero time or a nil pointer.
func reportTimes() *jsonv2.Unmarshalers {
	return jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *time.Time) error {
			parsed, _, err := reportTime(dec)
			*t = parsed
			return err
		}),
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t **time.Time) error {
			parsed, ok, err := reportTime(dec)
			*t = nil
			if ok {
				*t = &parsed
			}
			return err
		}),
	)
}

// reportTime reads the next value of dec as a report time.
func reportTime(dec *jsontext.Decoder) (time.Time, bool, error) {
	if dec.PeekKind() != '"' {
		return time.Time{}, false, dec.SkipValue()
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return time.Time{}, false, err
	}
	parsed, perr := time.Parse(time.RFC3339Nano, tok.String())
	return parsed, perr == nil, nil
}

// answerBufferBytes is the most an answer written in one Write before
// its handler returns may hold for net/http to set its Content-Length:
// the buffer HTTP/1.1 fills before it chunks (HTTP/2's is larger).
const answerBufferBytes = 2048

// heldWriteSlack is the time a held heartbeat's answer gets to be written
// once the coordinator has it.
const heldWriteSlack = 5 * time.Second
