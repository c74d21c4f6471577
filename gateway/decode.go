package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// Body limits per route. Admin bodies follow the protocol's 1 MiB. A login
// holds a username (200 bytes) and a password (bcrypt reads 72), so 16 KiB
// is generous. A heartbeat lists at most every shard of a stream
// (protocol.MaxShardCount) in ownedShards or revokingShards, plus one
// shardProgress entry each; maxHeartbeatShardBytes is the JSON of one shard
// in both lists with every field at its longest (a 200-character prefix in
// streamKey, 20-digit stream ids, RFC 3339 times with nanoseconds), spaces
// after separators included, rounded up.
const (
	maxLoginBodyBytes      = 16 << 10
	maxHeartbeatShardBytes = 640
	maxHeartbeatBodyBytes  = 64<<10 + protocol.MaxShardCount*maxHeartbeatShardBytes
)

// MaxHeartbeatBodyBytes is the largest heartbeat body accepted; larger
// ones get 413. It fits a member owning protocol.MaxShardCount shards.
const MaxHeartbeatBodyBytes = maxHeartbeatBodyBytes

// readBody reads the request body, refusing more than protocol.MaxBodyBytes
// (413) and bodies that announce a content type other than JSON (415). A
// missing content type is accepted: some clients send none.
func (s *server) readBody(c *gin.Context) ([]byte, *protocol.Error) {
	return s.readBodyLimit(c, protocol.MaxBodyBytes)
}

// readBodyLimit is readBody with a limit of its own.
func (s *server) readBodyLimit(c *gin.Context, limit int64) ([]byte, *protocol.Error) {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		media, _, err := mime.ParseMediaType(ct)
		if err != nil || !(media == "application/json" || strings.HasSuffix(media, "+json")) {
			return nil, protocol.Errorf(protocol.CodeUnsupportedMediaType,
				fmt.Sprintf("content type %q is not JSON; send application/json", capField(ct)))
		}
	}
	return s.readBodyInto(c, limit, new(bytes.Buffer))
}

// readBodyInto reads c's body into buf (empty), whose bytes the answer
// is, whatever its content type. A body over smallBodyBytes first reserves
// its size from the large-body budget (bodyMemory): Content-Length when
// announced, else, once the first smallBodyBytes are read, the rest of the
// limit.
func (s *server) readBodyInto(c *gin.Context, limit int64, buf *bytes.Buffer) ([]byte, *protocol.Error) {
	size := c.Request.ContentLength
	if size > limit {
		return nil, tooBig(limit)
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	if size > smallBodyBytes {
		// Announced: reserve it all before reading any.
		release, perr := s.reserveBody(c, size-smallBodyBytes)
		if perr != nil {
			return nil, perr
		}
		defer release()
	}
	if size >= 0 {
		// Room for the announced body and for the read that sees its end
		// (ReadFrom wants MinRead free before each read): one allocation,
		// where growing from nothing took several.
		buf.Grow(int(size) + bytes.MinRead)
	} else {
		// Not announced (chunked): the first smallBodyBytes are free, the
		// rest of the limit is reserved if the body goes on.
		if _, err := io.Copy(buf, io.LimitReader(body, smallBodyBytes)); err != nil {
			return nil, readProblem(err, limit)
		}
		if buf.Len() == smallBodyBytes {
			release, perr := s.reserveBody(c, limit-smallBodyBytes)
			if perr != nil {
				return nil, perr
			}
			defer release()
		}
	}
	if _, err := io.Copy(buf, body); err != nil {
		return nil, readProblem(err, limit)
	}
	return buf.Bytes(), nil
}

// tooBig is the answer to a body over limit bytes.
func tooBig(limit int64) *protocol.Error {
	return protocol.Errorf(protocol.CodePayloadTooLarge, fmt.Sprintf("request body is over %d bytes", limit))
}

// reserveBody reserves n bytes of the large-body budget for c's body,
// counting a refusal (429) in rscoord_rate_limit_refusals_total.
func (s *server) reserveBody(c *gin.Context, n int64) (release func(), perr *protocol.Error) {
	release, perr = s.bodies.reserve(c.Request.Context(), n)
	if perr != nil {
		s.metrics.RateLimited(metrics.LimiterBodyMemory)
	}
	return release, perr
}

// readProblem is the answer to a failed body read: tooBig past the limit,
// else a body cut off or too slow.
func readProblem(err error, limit int64) *protocol.Error {
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return tooBig(limit)
	}
	return protocol.Errorf(protocol.CodeInvalidRequest, "could not read the request body (timed out or cut off)")
}

// decodeBody decodes an admin request body into v. An empty body decodes
// as {} so that optional-only bodies may be left out.
func (s *server) decodeBody(c *gin.Context, v any) bool {
	body, perr := s.readBody(c)
	if perr == nil && len(strings.TrimSpace(string(body))) > 0 {
		var verr *valueError
		if err := decodeJSON(body, v); errors.As(err, &verr) {
			perr = protocol.Errorf(protocol.CodeInvalidRequest, verr.message)
		} else if err != nil {
			perr = protocol.Errorf(protocol.CodeInvalidRequest, "malformed JSON body: "+jsonProblem(err))
		}
	}
	if perr == nil {
		perr = checkOperator(v)
	}
	if perr != nil {
		abortWith(c, perr.Code, perr.Message)
		return false
	}
	return true
}

// checkOperator checks the operator fields of an admin body: requestedBy
// must name someone (not blank once trimmed), and requestedBy and reason
// are capped (capField), so that no request stores or logs more of them.
func checkOperator(v any) *protocol.Error {
	var by, reason *string
	switch r := v.(type) {
	case *protocol.CreateRequest:
		by, reason = &r.RequestedBy, &r.Reason
	case *protocol.DeleteGroupRequest:
		by, reason = &r.RequestedBy, &r.Reason
	case *protocol.DeleteStreamRequest:
		by, reason = &r.RequestedBy, &r.Reason
	case *protocol.ScaleRequest:
		by, reason = &r.RequestedBy, &r.Reason
	case *scaleBody:
		by, reason = &r.RequestedBy, &r.Reason
	case *protocol.OperatorRequest:
		by, reason = &r.RequestedBy, &r.Reason
	default:
		return nil
	}
	if *by != "" && strings.TrimSpace(*by) == "" {
		return protocol.Errorf(protocol.CodeInvalidRequest, "requestedBy must name who asks for this change, not be blank")
	}
	*by, *reason = capField(*by), capField(*reason)
	return nil
}

// decodeJSON decodes a request body into v with encoding/json's rules
// (numbers, nulls, unknown members ignored) but two of its leniencies
// removed: a member name must match the field's JSON name exactly, case
// included ("MemberId" binds nothing), and a name given twice in one
// object is an error, so that no second spelling or copy of a field can
// carry a value past what checked the first.
func decodeJSON(body []byte, v any) error {
	return jsonv2.Unmarshal(body, v, decodeOptions())
}

// decodeOptions are decodeJSON's rules as options.
func decodeOptions() jsonv2.Options {
	return jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(),
		jsonv2.MatchCaseInsensitiveNames(false), jsontext.AllowDuplicateNames(false))
}

// jsonProblem describes a decoding failure without echoing the body.
func jsonProblem(err error) string {
	var syntax *jsonv1.SyntaxError
	var typ *jsonv1.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		// The body itself has the wrong shape (an array, a string): the
		// Go type it missed means nothing to a client.
		return fmt.Sprintf("the body must be a JSON object, not %s", typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
	default:
		return err.Error()
	}
}

// utcTime is the scale's deprecatedAfter, the one request time the
// gateway decodes. The protocol's times are RFC 3339 strings in UTC; a time
// written without a zone (as the reference clients write some, see
// decodeHeartbeat) is read as UTC, which is what "in UTC" says it means,
// rather than refused. Anything else is a [*valueError] that says the
// format: a number above all, whose unit (seconds or milliseconds since
// the epoch) the contract does not give and no reference client sends, so
// reading one would be a guess off by a factor of 1000.
type utcTime struct{ time.Time }

// zonelessLayout is RFC 3339 without the offset; fractions of any length
// parse.
const zonelessLayout = "2006-01-02T15:04:05"

// maxEchoedTime is the longest time text an error message quotes back (a
// nanosecond RFC 3339 time with an offset is 35 bytes).
const maxEchoedTime = 64

// timeFormat is what a refused deprecatedAfter is told to send.
const timeFormat = `an RFC 3339 time string such as "2026-01-01T00:00:00Z" (read as UTC when written without a zone)`

// valueError is a well-formed body with a value of the wrong form; its
// message is the whole answer.
type valueError struct{ message string }

func (e *valueError) Error() string { return e.message }

// UnmarshalJSON reads an RFC 3339 time, or one without a zone as UTC.
func (t *utcTime) UnmarshalJSON(raw []byte) error {
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		kind := "a number: its unit, seconds or milliseconds since the epoch, would be a guess"
		switch raw[0] {
		case '{':
			kind = "an object"
		case '[':
			kind = "an array"
		case 't', 'f':
			kind = "a boolean"
		}
		return &valueError{"deprecatedAfter must be " + timeFormat + ", not " + kind}
	}
	parsed, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		var zoneless error
		if parsed, zoneless = time.ParseInLocation(zonelessLayout, text, time.UTC); zoneless != nil {
			if len(text) > maxEchoedTime {
				// Not echoed: the message would carry the client's text.
				return &valueError{fmt.Sprintf("deprecatedAfter (%d bytes) is not a time; send %s", len(text), timeFormat)}
			}
			return &valueError{fmt.Sprintf("deprecatedAfter %q is not a time; send %s", text, timeFormat)}
		}
	}
	t.Time = parsed
	return nil
}

// ptr is the time as the protocol types carry it: nil when t is nil.
func (t *utcTime) ptr() *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// scaleBody is a scale request as the gateway reads it: deprecatedAfter
// may come without a zone (utcTime). Its own field shadows the embedded
// one when decoding.
type scaleBody struct {
	protocol.ScaleRequest
	DeprecatedAfter *utcTime `json:"deprecatedAfter"`
}

// request is the decoded scale request.
func (b *scaleBody) request() protocol.ScaleRequest {
	req := b.ScaleRequest
	req.DeprecatedAfter = b.DeprecatedAfter.ptr()
	return req
}
