package coordclient

import (
	"context"
	"net/http"

	"github.com/rscoord/rscoord/client/protocol"
)

// CreateAPIToken creates a long-lived API token (ADMIN). The answer holds
// the token's value, which the server cannot show again.
func (c *Client) CreateAPIToken(ctx context.Context, req protocol.APITokenCreateRequest) (protocol.APITokenCreateResponse, error) {
	var resp protocol.APITokenCreateResponse
	_, err := c.Do(ctx, http.MethodPost, APITokensPath(), req, &resp)
	return resp, err
}

// ListAPITokens lists every API token, without their values (ADMIN).
func (c *Client) ListAPITokens(ctx context.Context) (protocol.APITokensResponse, error) {
	var resp protocol.APITokensResponse
	_, err := c.Do(ctx, http.MethodGet, APITokensPath(), nil, &resp)
	return resp, err
}

// RevokeAPIToken revokes the API token name (ADMIN).
func (c *Client) RevokeAPIToken(ctx context.Context, name string, req protocol.APITokenRevokeRequest) error {
	_, err := c.Do(ctx, http.MethodDelete, APITokenPath(name), req, nil)
	return err
}

// APITokensPath is /auth/tokens: POST creates an API token, GET lists them.
func APITokensPath() string { return Path("auth", "tokens") }

// APITokenPath is DELETE /auth/tokens/{name}: revoke an API token.
func APITokenPath(name string) string { return Path("auth", "tokens", name) }
