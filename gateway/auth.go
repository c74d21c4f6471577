package gateway

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/internal/window"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// principalKey is the context key of the principal authorize let through.
type principalKey struct{}

// authorized is a request's context once authorize let it through,
// carrying the principal in place: in gin's key map it cost every
// request the map and a copy of the principal on the heap.
type authorized struct {
	context.Context
	p auth.Principal
}

// Value is the principal for principalKey, else the parent's value.
func (a *authorized) Value(key any) any {
	if key == (principalKey{}) {
		return &a.p
	}
	return a.Context.Value(key)
}

// authFailure is why a request carries no usable credentials.
type authFailure struct {
	code       protocol.ErrorCode // UNAUTHORIZED or RATE_LIMIT_EXCEEDED
	message    string
	retryAfter time.Duration
}

// authenticate finds who the caller is from its Authorization header:
// Basic or Bearer, scheme name in any case (docs/protocol.md §4). With
// authentication off every caller is the anonymous ADMIN. Messages never
// repeat what the client sent.
func (s *server) authenticate(c *gin.Context) (auth.Principal, *authFailure) {
	if s.auth == nil {
		return auth.Anonymous(), nil
	}
	header := c.GetHeader("Authorization")
	if header == "" {
		return auth.Principal{}, unauthorized("credentials required: send Authorization: Basic or Bearer")
	}
	scheme, value := auth.SplitAuthorization(header)
	switch {
	case strings.EqualFold(scheme, "basic"):
		if p, ok := recallBasic(c.Request, header, s.auth.Now()); ok {
			return p, nil
		}
		user, password, ok := auth.ParseBasic(value)
		if !ok {
			return auth.Principal{}, unauthorized("malformed Basic credentials")
		}
		p, fail := s.checkPassword(c, user, password)
		if fail == nil {
			if _, until, ok := s.auth.VerifiedUntil(user, password); ok {
				rememberBasic(c.Request, header, p, until)
			}
		}
		return p, fail
	case strings.EqualFold(scheme, "bearer"):
		p, err := s.auth.VerifyBearer(c.Request.Context(), value)
		if errors.Is(err, auth.ErrExpiredToken) {
			return auth.Principal{}, unauthorized("token expired; log in again")
		}
		if errors.Is(err, auth.ErrRevokedToken) {
			return auth.Principal{}, unauthorized("token revoked (logout or password change); log in again")
		}
		if errors.Is(err, auth.ErrAPITokenStore) {
			return auth.Principal{}, unauthorized("API tokens cannot be checked now (store unavailable); retry")
		}
		if err != nil {
			return auth.Principal{}, unauthorized("invalid token")
		}
		return p, nil
	default:
		return auth.Principal{}, unauthorized("unsupported authorization scheme; use Basic or Bearer")
	}
}

func unauthorized(message string) *authFailure {
	return &authFailure{code: protocol.CodeUnauthorized, message: message}
}

// passwordLimited is the 429 of a password check that did not run or
// failed past its limit: err is the limiter's [*window.LimitError] (its
// Retry-After is the window's end, and message says which limit), or why
// the request could not wait for its check.
func passwordLimited(err error, message string) *authFailure {
	var limited *window.LimitError
	if errors.As(err, &limited) {
		return &authFailure{code: protocol.CodeRateLimitExceeded, message: message, retryAfter: limited.RetryAfter}
	}
	return &authFailure{code: protocol.CodeRateLimitExceeded,
		message: "too many password checks in flight; retry later", retryAfter: time.Second}
}

// loginUserKey is the key of the per-user login limit: the username from
// one client address, so that failures elsewhere never lock out the user
// where its real clients run. Names no user can have share one key per
// address: the limiter keeps its keys for the window, and an
// attacker-chosen name may be as long as the login body or the header.
func loginUserKey(c *gin.Context, user string) string {
	if auth.ValidateUsername(user) != nil {
		user = "\x00impossible"
	}
	return user + "\x00" + c.ClientIP()
}

// authorize lets the request through when the caller's credentials are
// good (401 otherwise) and its roles allow perm (403 otherwise): on the
// stream the path names, or on every stream for routes that name none.
// On heartbeats the member id must also be one the caller is bound to.
func (s *server) authorize(perm auth.Permission) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, fail := s.authenticate(c)
		if fail != nil {
			s.refuseAuth(c, fail)
			return
		}
		trustConnection(c.Writer, c.Request)
		stream := c.Param("prefix")
		// The principal goes with the request before any refusal, for the
		// audit entry of a 403. The coordinator names the caller in what
		// it registers on the fly, and limits it unless ADMIN.
		ctx := actors.WithCaller(c.Request.Context(), actors.Caller{Principal: p.Username, Admin: p.AllowedOn(auth.PermAdmin, stream)})
		c.Request = c.Request.WithContext(&authorized{Context: ctx, p: p})
		switch {
		case stream == "" && !p.Allowed(perm):
			s.forbid(c, "this endpoint needs the "+perm.String()+" role on every stream")
			return
		case stream != "" && !p.AllowedOn(perm, stream):
			s.forbid(c, "this endpoint needs the "+perm.String()+" role on this stream")
			return
		case c.FullPath() == heartbeatRoute && !p.MemberAllowed(c.Param("member")):
			s.forbid(c, "these credentials may not heartbeat as this member id")
			return
		}
		c.Next()
	}
}

// forbid answers 403 and counts it.
func (s *server) forbid(c *gin.Context, message string) {
	s.metrics.AuthRefused(http.StatusForbidden)
	abortWith(c, protocol.CodeForbidden, message)
}

// refuseAuth answers an authentication failure: 401 with the Basic
// challenge, or 429 with Retry-After.
func (s *server) refuseAuth(c *gin.Context, fail *authFailure) {
	if fail.code == protocol.CodeRateLimitExceeded {
		s.metrics.RateLimited(metrics.LimiterLogin)
		tooMany(c, fail.message, fail.retryAfter)
		return
	}
	s.metrics.AuthRefused(http.StatusUnauthorized)
	// A browser that sees a Basic challenge on a script's request opens
	// its own password dialog (a headless one waits for it for ever), so
	// script clients that say so (X-Requested-With, as the console sends)
	// get the 401 without it.
	if c.GetHeader("X-Requested-With") == "" {
		c.Header("WWW-Authenticate", `Basic realm="rscoord"`)
	}
	abortWith(c, protocol.CodeUnauthorized, fail.message)
}

// tooMany answers 429 RATE_LIMIT_EXCEEDED with Retry-After in whole
// seconds, at least 1.
func tooMany(c *gin.Context, message string, retry time.Duration) {
	secs := int(math.Ceil(retry.Seconds()))
	if secs < 1 {
		secs = 1
	}
	c.Header("Retry-After", strconv.Itoa(secs))
	abortWith(c, protocol.CodeRateLimitExceeded, message)
}

// principal is the caller authorized for this request, if any.
func principal(c *gin.Context) (auth.Principal, bool) {
	p, ok := c.Request.Context().Value(principalKey{}).(*auth.Principal)
	if !ok {
		return auth.Principal{}, false
	}
	return *p, true
}
