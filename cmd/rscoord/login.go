package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// savedLogin is what "rscoord login" keeps: one token per server.
type savedLogin struct {
	Server      string    `json:"server"`
	Username    string    `json:"username"`
	AccessToken string    `json:"accessToken"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

// tokenStore is the file of saved logins, under the user's configuration
// directory (os.UserConfigDir: $XDG_CONFIG_HOME or ~/.config on Linux),
// readable by its owner only.
type tokenStore struct {
	path string
}

// defaultTokenStore is the store at <config dir>/rscoord/tokens.json.
func defaultTokenStore() (tokenStore, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return tokenStore{}, fmt.Errorf("find the configuration directory: %w", err)
	}
	return tokenStore{path: filepath.Join(dir, "rscoord", "tokens.json")}, nil
}

// load reads every saved login; a missing file is none.
func (s tokenStore) load() ([]savedLogin, error) {
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	var logins []savedLogin
	if err := json.Unmarshal(raw, &logins); err != nil {
		return nil, fmt.Errorf("read %s: %w (delete it and log in again)", s.path, err)
	}
	return logins, nil
}

// lookup returns the unexpired login saved for server, if any.
func (s tokenStore) lookup(server string, now time.Time) (savedLogin, bool, error) {
	logins, err := s.load()
	if err != nil {
		return savedLogin{}, false, err
	}
	for _, l := range logins {
		if l.Server == server && now.Before(l.ExpiresAt) {
			return l, true, nil
		}
	}
	return savedLogin{}, false, nil
}

// save replaces the login of l.Server. The file is written to a temporary
// file of mode 0600 and renamed, so a reader never sees half a file and the
// token is never readable by others, not even for a moment.
func (s tokenStore) save(l savedLogin) error {
	return s.update(func(logins []savedLogin) []savedLogin {
		out := []savedLogin{l}
		for _, old := range logins {
			if old.Server != l.Server {
				out = append(out, old)
			}
		}
		return out
	})
}

// remove forgets the login of server; it reports whether there was one.
func (s tokenStore) remove(server string) (bool, error) {
	found := false
	err := s.update(func(logins []savedLogin) []savedLogin {
		out := []savedLogin{}
		for _, old := range logins {
			if old.Server == server {
				found = true
				continue
			}
			out = append(out, old)
		}
		return out
	})
	return found, err
}

func (s tokenStore) update(change func([]savedLogin) []savedLogin) error {
	logins, err := s.load()
	if err != nil {
		return err
	}
	raw, err := json.MarshalIndent(change(logins), "", "  ")
	if err != nil {
		return fmt.Errorf("encode saved logins: %w", err)
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".tokens-*.json") // mode 0600
	if err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename: already gone
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save login: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	return nil
}

// LoginCmd is "rscoord login". It has flags of its own rather than
// AdminFlags: a missing password is asked for, not an error.
type LoginCmd struct {
	Server   string        `default:"http://127.0.0.1:8080" env:"RSCOORD_SERVER" help:"Coordinator: a base URL, or host:port for http://host:port."`
	JSON     bool          `name:"json" help:"Print the result (and errors) as JSON."`
	Timeout  time.Duration `default:"10s" help:"Bound on the request (0: none)."`
	User     string        `required:"" env:"RSCOORD_USER" help:"User to log in as."`
	Password string        `env:"RSCOORD_PASSWORD" help:"Password of --user; asked for without echo on a terminal, else read from stdin, when not given."`
}

// Run logs in and saves the token for later commands against the same
// --server.
func (c *LoginCmd) Run(ctx context.Context, in io.Reader, out io.Writer, stderr stderrWriter) error {
	client, err := NewClient(c.Server, c.Timeout)
	if err != nil {
		return fmt.Errorf("login: --server/--timeout: %w", err)
	}
	tokens, err := defaultTokenStore()
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	password := c.Password
	if password == "" {
		if password, err = readSecret(in, stderr, "Password for "+c.User+": "); err != nil {
			return fmt.Errorf("login: %w", err)
		}
	}
	// Basic on an empty body: the password never goes into a JSON body
	// that a proxy might log.
	client.authorization = "Basic " + base64.StdEncoding.EncodeToString([]byte(c.User+":"+password))
	var resp protocol.LoginResponse
	if _, err := client.Do(ctx, http.MethodPost, coordclient.LoginPath(), nil, &resp); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if err := tokens.save(savedLogin{Server: client.base, Username: c.User, AccessToken: resp.AccessToken, ExpiresAt: resp.ExpiresAt}); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if c.JSON {
		return printValue(out, map[string]any{"server": client.base, "username": c.User, "roles": resp.Roles, "expiresAt": resp.ExpiresAt})
	}
	return printLine(out, "Logged in to %s as %s (%s) until %s; token saved in %s.",
		client.base, c.User, strings.Join(resp.Roles, ","), resp.ExpiresAt.UTC().Format(time.RFC3339), tokens.path)
}

// LogoutCmd is "rscoord logout".
type LogoutCmd struct {
	AdminFlags `embed:""`
}

// Run revokes the token saved for --server on the server (POST
// /auth/logout) and forgets it. A token the server no longer accepts is
// forgotten all the same.
func (c *LogoutCmd) Run(ctx context.Context, a *Admin) error {
	saved, ok, err := a.Tokens.lookup(a.Client.base, time.Now())
	if err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	if ok {
		a.Client.authorization = "Bearer " + saved.AccessToken
		_, err := a.Client.Do(ctx, http.MethodPost, coordclient.Path("auth", "logout"), nil, nil)
		var apiErr *APIError
		if err != nil && !(errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized) {
			return fmt.Errorf("logout: %w (the token is kept; retry)", err)
		}
	}
	found, err := a.Tokens.remove(a.Client.base)
	if err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	if !found {
		return printLine(a.Out, "No saved login for %s.", a.Client.base)
	}
	return printLine(a.Out, "Logged out of %s; the token is revoked and forgotten.", a.Client.base)
}
