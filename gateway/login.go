package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// login issues a bearer token for {username,password}, or for the Basic
// header when the body carries no credentials (docs/protocol.md §4).
// Failed checks count against the username and the client address; past
// either limit the login answers 429 before any password is checked.
// Checks still running count too, until they succeed.
func (s *server) login(c *gin.Context) {
	body, perr := s.readBodyLimit(c, maxLoginBodyBytes)
	if perr != nil {
		abortWith(c, perr.Code, perr.Message)
		return
	}
	var req protocol.LoginRequest
	hasBody := len(strings.TrimSpace(string(body))) > 0
	if hasBody {
		if err := decodeJSON(body, &req); err != nil {
			abortWith(c, protocol.CodeInvalidRequest, "malformed JSON body: "+jsonProblem(err))
			return
		}
	}
	scheme, value := auth.SplitAuthorization(c.GetHeader("Authorization"))
	basicUser, basicPassword, basicOK := auth.ParseBasic(value)
	basicOK = basicOK && strings.EqualFold(scheme, "basic")
	switch {
	case req.Username != "" && req.Password != "":
		// Credentials in the body win over any header.
	case req.Username == "" && req.Password == "" && basicOK:
		// A body without credentials ({}, null, members null or empty)
		// is read as the empty body §4 pairs with a Basic header: client
		// libraries that always send a JSON body send one of those for
		// "nothing".
		req = protocol.LoginRequest{Username: basicUser, Password: basicPassword}
	case hasBody:
		abortWith(c, protocol.CodeInvalidRequest, "username and password are required")
		return
	default:
		s.refuseAuth(c, unauthorized("send {username,password} or an Authorization: Basic header"))
		return
	}
	if s.auth == nil {
		// Authentication is off: every caller is the anonymous ADMIN and
		// tokens are ignored; answer one so that clients proceed.
		c.JSON(http.StatusOK, protocol.LoginResponse{AccessToken: auth.AnonymousName, TokenType: "Bearer",
			ExpiresAt: s.opts.Now().UTC().Add(auth.DefaultTokenTTL).Truncate(time.Second), ExpiresInSeconds: int64(auth.DefaultTokenTTL.Seconds()),
			Roles: auth.Anonymous().Roles.Names()})
		return
	}
	p, fail := s.checkPassword(c, req.Username, req.Password)
	if fail != nil {
		s.refuseAuth(c, fail)
		return
	}
	tok, err := s.auth.Issue(p)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, protocol.LoginResponse{
		AccessToken: tok.Value, TokenType: "Bearer", ExpiresAt: tok.ExpiresAt,
		ExpiresInSeconds: int64(tok.ExpiresAt.Sub(s.opts.Now()).Seconds()),
		Roles:            p.AllRoles().Names(),
	})
}

// logout revokes the bearer token the caller sends, until it expires. It
// checks the token itself: a bad one is a 401 like anywhere else.
func (s *server) logout(c *gin.Context) {
	if s.auth == nil {
		c.Status(http.StatusNoContent) // no tokens to revoke
		return
	}
	header := strings.TrimSpace(c.GetHeader("Authorization"))
	if header == "" {
		// No credentials at all is what every other route calls 401,
		// challenge included; 400 is for credentials of the wrong kind.
		s.refuseAuth(c, unauthorized("credentials required: send Authorization: Bearer <accessToken>"))
		return
	}
	scheme, value := auth.SplitAuthorization(header)
	if !strings.EqualFold(scheme, "bearer") {
		abortWith(c, protocol.CodeInvalidRequest, "logout revokes a bearer token: send Authorization: Bearer <accessToken>")
		return
	}
	if auth.IsAPIToken(value) {
		abortWith(c, protocol.CodeInvalidRequest, "logout revokes session tokens; revoke an API token with DELETE /coord/v1/auth/tokens/{name} (ADMIN)")
		return
	}
	p, fail := s.authenticate(c)
	if fail != nil {
		s.refuseAuth(c, fail)
		return
	}
	if v := s.logoutLimit.TakeOwned(p.Username, ""); !v.OK {
		s.metrics.RateLimited(metrics.LimiterLogout)
		tooMany(c, "too many logouts for this user; retry later", v.RetryAfter)
		return
	}
	err := s.auth.Revoke(value)
	switch {
	case errors.Is(err, auth.ErrTooManyRevocations):
		s.metrics.RateLimited(metrics.LimiterLogout)
		tooMany(c, "too many revoked tokens outstanding; retry later", time.Minute)
	case err != nil:
		s.log.Error("revoke token", slog.String("principal", p.Username), slog.Any("error", err))
		abortWith(c, protocol.CodeStoreUnavailable, "the revocation could not be stored; retry")
	default:
		c.Status(http.StatusNoContent)
	}
}

// session answers who the caller is.
func (s *server) session(c *gin.Context) {
	p, _ := principal(c)
	c.JSON(http.StatusOK, protocol.Session{
		Authenticated: p.Method == auth.MethodBasic || p.Method == auth.MethodBearer,
		Username:      p.Username,
		Roles:         p.AllRoles().Names(),
	})
}
