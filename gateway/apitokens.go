package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
)

// APITokenStore keeps the API tokens: the store every replica shares.
// Errors meant for clients are *protocol.Error (a name taken, 409; an
// unknown name, 404), possibly wrapped.
type APITokenStore interface {
	CreateAPIToken(ctx context.Context, tok StoredAPIToken) error
	ListAPITokens(ctx context.Context) ([]StoredAPIToken, error)
	DeleteAPIToken(ctx context.Context, name string) error
}

// StoredAPIToken is an API token as the store keeps it: its description
// and the SHA-256 of its secret.
type StoredAPIToken struct {
	protocol.APIToken
	SecretHash []byte
}

// maxAPITokenLifetime bounds expiresInSeconds: a hundred years is "never"
// for every purpose, and keeps the expiry a valid time.
const maxAPITokenLifetime = 100 * 365 * 24 * time.Hour

// apiTokensReady answers 400 or 404 when this server keeps no API tokens:
// authentication is off, or no store was given.
func (s *server) apiTokensReady(c *gin.Context) bool {
	switch {
	case s.auth == nil:
		abortWith(c, protocol.CodeInvalidRequest, "authentication is off (--no-auth): API tokens would not be checked")
		return false
	case s.opts.APITokens == nil:
		abortWith(c, protocol.CodeNotFound, "this server keeps no API tokens")
		return false
	}
	return true
}

// createAPIToken creates a long-lived API token for a configured user:
// POST /auth/tokens (ADMIN, audited). Its value is answered once; the
// store keeps only its hash.
func (s *server) createAPIToken(c *gin.Context) {
	if !s.apiTokensReady(c) {
		return
	}
	var req protocol.APITokenCreateRequest
	if !s.decodeBody(c, &req) {
		return
	}
	now := s.opts.Now().UTC().Truncate(time.Second)
	var expiresAt *time.Time
	switch {
	case strings.TrimSpace(req.RequestedBy) == "":
		abortWith(c, protocol.CodeInvalidRequest, "requestedBy is required")
		return
	case req.ExpiresInSeconds != nil && (*req.ExpiresInSeconds < 1 || time.Duration(*req.ExpiresInSeconds) > maxAPITokenLifetime/time.Second):
		abortWith(c, protocol.CodeInvalidRequest, "expiresInSeconds must be at least 1 and at most 100 years; leave it out for a token that works until revoked")
		return
	case req.ExpiresInSeconds != nil:
		t := now.Add(time.Duration(*req.ExpiresInSeconds) * time.Second)
		expiresAt = &t
	}
	if err := auth.ValidateUsername(req.Name); err != nil {
		abortWith(c, protocol.CodeInvalidRequest, "name: "+err.Error())
		return
	}
	if _, ok := s.auth.HasUser(req.Username); !ok {
		abortWith(c, protocol.CodeInvalidRequest, "username names no configured user (the users file or the bootstrap admin)")
		return
	}
	value, hash, err := auth.NewAPIToken(req.Name)
	if err != nil {
		s.writeError(c, err)
		return
	}
	p, _ := principal(c)
	tok := StoredAPIToken{APIToken: protocol.APIToken{Name: req.Name, Username: req.Username, CreatedAt: now,
		CreatedBy: p.Username, ExpiresAt: expiresAt}, SecretHash: hash}
	if err := s.opts.APITokens.CreateAPIToken(c.Request.Context(), tok); err != nil {
		s.writeError(c, err)
		return
	}
	s.auth.ForgetAPIToken(req.Name)
	s.log.Info("API token created", slog.String("name", req.Name), slog.String("user", req.Username),
		slog.String("principal", p.Username), slog.Any("expiresAt", expiresAt))
	c.JSON(http.StatusCreated, protocol.APITokenCreateResponse{APIToken: tok.APIToken, Token: value, TokenType: "Bearer"})
}

// listAPITokens lists the API tokens, without their values: GET
// /auth/tokens (ADMIN).
func (s *server) listAPITokens(c *gin.Context) {
	if !s.apiTokensReady(c) {
		return
	}
	stored, err := s.opts.APITokens.ListAPITokens(c.Request.Context())
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := protocol.APITokensResponse{Tokens: make([]protocol.APIToken, 0, len(stored))}
	for _, t := range stored {
		out.Tokens = append(out.Tokens, t.APIToken)
	}
	c.JSON(http.StatusOK, out)
}

// revokeAPIToken deletes an API token: DELETE /auth/tokens/{name} (ADMIN,
// audited). This replica refuses it at once, the others once their cache
// of it expires (auth.DefaultAPITokenCacheTTL).
func (s *server) revokeAPIToken(c *gin.Context) {
	if !s.apiTokensReady(c) {
		return
	}
	var req protocol.APITokenRevokeRequest
	if !s.decodeBody(c, &req) {
		return
	}
	name := c.Param("name")
	if err := s.opts.APITokens.DeleteAPIToken(c.Request.Context(), name); err != nil {
		s.writeError(c, err)
		return
	}
	s.auth.ForgetAPIToken(name)
	p, _ := principal(c)
	s.log.Info("API token revoked", slog.String("name", name), slog.String("principal", p.Username))
	c.Status(http.StatusNoContent)
}
