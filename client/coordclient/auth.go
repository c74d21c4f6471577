package coordclient

import "github.com/rscoord/rscoord/client/protocol"

// BasicAuth is the Authorization header value of HTTP Basic credentials
// (docs/protocol.md §4).
func BasicAuth(username, password string) string {
	return protocol.BasicAuthorization(username, password)
}

// BearerAuth is the Authorization header value of an access token from
// POST /auth/login.
func BearerAuth(token string) string { return protocol.BearerAuthorization(token) }

// Credentials are what a client authenticates with: a token, or a user and
// password, or nothing. Its zero value sends no credentials.
type Credentials struct {
	User, Password, Token string
}

// Authorization is the header value c asks for ("" for none), or an error
// naming the conflict: a token and a user exclude each other, and a user
// needs a password (and a password a user).
func (c Credentials) Authorization() (string, error) {
	switch {
	case c.Token != "" && (c.User != "" || c.Password != ""):
		return "", errConflict("a token and a user/password exclude each other: give one or the other")
	case c.Token != "":
		return BearerAuth(c.Token), nil
	case c.User != "" && c.Password == "":
		return "", errConflict("a user needs a password")
	case c.Password != "" && c.User == "":
		return "", errConflict("a password needs a user")
	case c.User != "":
		return BasicAuth(c.User, c.Password), nil
	}
	return "", nil
}

type errConflict string

func (e errConflict) Error() string { return "credentials: " + string(e) }
