package coordclient

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Sentinels an [*Error] matches with errors.Is, by error code or HTTP status.
var (
	// ErrStreamNotFound: 404 STREAM_NOT_FOUND.
	ErrStreamNotFound = errors.New("stream not found")
	// ErrGroupNotFound: 404 GROUP_NOT_FOUND.
	ErrGroupNotFound = errors.New("consumer group not found")
	// ErrUnauthorized: 401, credentials missing or refused.
	ErrUnauthorized = errors.New("credentials missing or refused")
	// ErrForbidden: 403, the credentials lack the role the call needs.
	ErrForbidden = errors.New("credentials lack the role")
)

// Error is a non-2xx answer of the coordinator: its HTTP status and the
// error body of docs/protocol.md §3. Every client of this package sees
// coordinator failures as this one type.
type Error struct {
	// StatusCode is the HTTP status, e.g. 409.
	StatusCode int
	// Body is the decoded §3 body. When the answer was not one (a proxy's
	// page, say), ErrorCode is empty and Message holds the start of what
	// was answered.
	Body protocol.ErrorBody
	// RetryAfter is the Retry-After header (429, 503) as a duration; 0
	// when absent or not a number of seconds.
	RetryAfter time.Duration
}

// Code is the body's error code ("" when the body was not a §3 body).
func (e *Error) Code() protocol.ErrorCode { return e.Body.ErrorCode }

// Error reads "409 GROUP_ALREADY_EXISTS: Group already exists", with
// " (retry after 2s)" when the answer carried Retry-After.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.StatusCode))
	if e.Body.ErrorCode != "" {
		b.WriteString(" " + string(e.Body.ErrorCode))
	} else if text := http.StatusText(e.StatusCode); text != "" {
		b.WriteString(" " + text)
	}
	if e.Body.Message != "" {
		b.WriteString(": " + e.Body.Message)
	}
	if e.RetryAfter > 0 {
		b.WriteString(" (retry after " + e.RetryAfter.String() + ")")
	}
	return b.String()
}

// Is matches the package's sentinels: ErrStreamNotFound and
// ErrGroupNotFound by error code, ErrUnauthorized and ErrForbidden by
// status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrStreamNotFound:
		return e.Body.ErrorCode == protocol.CodeStreamNotFound
	case ErrGroupNotFound:
		return e.Body.ErrorCode == protocol.CodeGroupNotFound
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	}
	return false
}

// Temporary reports whether the same call may succeed later unchanged:
// 429, 503, and 5xx answers that are not §3 bodies (a proxy between
// restarts). A 4xx is the caller's mistake and never heals by itself.
func (e *Error) Temporary() bool {
	switch {
	case e.StatusCode == http.StatusTooManyRequests, e.StatusCode == http.StatusServiceUnavailable:
		return true
	case e.StatusCode >= 500:
		return e.Body.ErrorCode == "" || e.Body.ErrorCode == protocol.CodeInternal
	}
	return false
}

// DecodeError turns a non-2xx answer with body raw into an *Error. A body
// that is not a §3 error body is kept as the message: its first line,
// white space folded, at most 200 bytes.
func DecodeError(resp *http.Response, raw []byte) *Error {
	e := &Error{StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var body protocol.ErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && body.ErrorCode != "" {
		e.Body = body
		return e
	}
	text := strings.TrimSpace(string(raw))
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	e.Body.Message = text
	return e
}

// retryAfter reads a Retry-After header in seconds (the coordinator's
// form); an HTTP date or garbage reads as 0.
func retryAfter(h string) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	n, err := strconv.ParseInt(h, 10, 64)
	if err != nil || n < 0 || n > 24*3600 {
		return 0
	}
	return time.Duration(n) * time.Second
}
