package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
)

// TokenCmd groups the API token commands. Their --user names the token's
// user, so the admin's own user name is --admin-user (or RSCOORD_USER).
type TokenCmd struct {
	TokenAdminFlags `embed:""`

	Create TokenCreateCmd `cmd:"" help:"Create a long-lived API token for a service and print it (once: the server keeps only its hash). ADMIN."`
	List   TokenListCmd   `cmd:"" help:"List the API tokens (never their values). ADMIN."`
	Revoke TokenRevokeCmd `cmd:"" help:"Revoke an API token: refused at once by this server, within 2 s by every replica. ADMIN."`
}

// TokenAdminFlags are [AdminFlags] with the Basic user renamed
// --admin-user: "rscoord token create --user" names the token's user.
type TokenAdminFlags struct {
	Server  string        `default:"http://127.0.0.1:8080" env:"RSCOORD_SERVER" help:"Coordinator: a base URL, or host:port for http://host:port."`
	JSON    bool          `name:"json" help:"Print the JSON answer instead of a table."`
	Timeout time.Duration `default:"10s" help:"Bound on each request to the coordinator (0: none)."`

	AdminUser string `name:"admin-user" env:"RSCOORD_USER" help:"Admin user name sent with Basic credentials."`
	Password  string `env:"RSCOORD_PASSWORD" help:"Password of --admin-user (prefer the environment variable: ps shows flags)."`
	Token     string `env:"RSCOORD_TOKEN" help:"Bearer token of an ADMIN, instead of --admin-user/--password (default: the token rscoord login saved for --server)."`
}

// ProvideAdmin builds the [Admin] of the token commands.
func (f *TokenAdminFlags) ProvideAdmin(out io.Writer) (*Admin, error) {
	admin := AdminFlags{Server: f.Server, JSON: f.JSON, Timeout: f.Timeout, User: f.AdminUser, Password: f.Password, Token: f.Token}
	a, err := admin.ProvideAdmin(out)
	if err != nil {
		return nil, fmt.Errorf("%s", strings.NewReplacer("--user", "--admin-user").Replace(err.Error()))
	}
	return a, nil
}

// TokenCreateCmd is "rscoord token create".
type TokenCreateCmd struct {
	User        string `required:"" name:"user" placeholder:"USER" help:"Configured user the token authenticates as, with that user's roles."`
	Name        string `required:"" placeholder:"NAME" help:"Unique name of the token (1-200 of [A-Za-z0-9._@-]); revoke it by this name."`
	Expires     string `placeholder:"DURATION" help:"Lifetime, e.g. 720h or 90d; default: until revoked (--token-ttl does not apply)."`
	Reason      string `placeholder:"TEXT" help:"Why, for the audit log."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// Run creates the token: POST /auth/tokens, and prints its value alone
// on stdout (or the whole answer with --json).
func (c *TokenCreateCmd) Run(ctx context.Context, a *Admin) error {
	if err := auth.ValidateUsername(c.Name); err != nil {
		return fmt.Errorf("token create: --name: %w", err)
	}
	req := protocol.APITokenCreateRequest{Username: c.User, Name: c.Name, RequestedBy: c.RequestedBy, Reason: c.Reason}
	if c.Expires != "" {
		d, err := parseLifetime(c.Expires)
		if err != nil {
			return fmt.Errorf("token create: --expires: %w", err)
		}
		secs := int64(d / time.Second)
		req.ExpiresInSeconds = &secs
	}
	var resp protocol.APITokenCreateResponse
	raw, err := a.Client.Do(ctx, http.MethodPost, coordclient.APITokensPath(), req, &resp)
	if err != nil {
		return fmt.Errorf("token create %s: %w", c.Name, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	return printLine(a.Out, "%s", resp.Token)
}

// parseLifetime reads a Go duration, or a whole number of days ("90d"),
// of at least one second.
func parseLifetime(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 1 || n > 36500 {
			return 0, fmt.Errorf("%q: want a duration such as 720h or a number of days such as 90d (at most 36500d)", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want a duration such as 720h or a number of days such as 90d", s)
		}
	}
	if d < time.Second {
		return 0, errors.New("the lifetime must be at least 1s")
	}
	return d, nil
}

// TokenListCmd is "rscoord token list".
type TokenListCmd struct{}

// Run lists the tokens: GET /auth/tokens.
func (c *TokenListCmd) Run(ctx context.Context, a *Admin) error {
	var resp protocol.APITokensResponse
	raw, err := a.Client.Do(ctx, http.MethodGet, coordclient.APITokensPath(), nil, &resp)
	if err != nil {
		return fmt.Errorf("token list: %w", err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	t := newTable(a.Out, "NAME", "USER", "CREATED", "CREATED BY", "EXPIRES")
	for _, tok := range resp.Tokens {
		created := tok.CreatedAt
		expires := "never"
		if tok.ExpiresAt != nil {
			expires = formatTime(tok.ExpiresAt)
		}
		t.row(tok.Name, tok.Username, formatTime(&created), orNone(tok.CreatedBy), expires)
	}
	return t.flush()
}

// TokenRevokeCmd is "rscoord token revoke".
type TokenRevokeCmd struct {
	Name        string `required:"" placeholder:"NAME" help:"Name of the token to revoke."`
	Reason      string `placeholder:"TEXT" help:"Why, for the audit log."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// Run revokes the token: DELETE /auth/tokens/{name}.
func (c *TokenRevokeCmd) Run(ctx context.Context, a *Admin) error {
	req := protocol.APITokenRevokeRequest{RequestedBy: c.RequestedBy, Reason: c.Reason}
	if _, err := a.Client.Do(ctx, http.MethodDelete, coordclient.APITokenPath(c.Name), req, nil); err != nil {
		return fmt.Errorf("token revoke %s: %w", c.Name, err)
	}
	if a.JSON {
		return printLine(a.Out, `{"revoked":%q}`, c.Name)
	}
	return printLine(a.Out, "revoked API token %s", c.Name)
}
