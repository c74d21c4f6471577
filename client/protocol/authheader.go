package protocol

import "encoding/base64"

// BasicAuthorization is the Authorization header value for HTTP Basic
// credentials (§4), as every client sends it.
func BasicAuthorization(username, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(username+":"+password))
}

// BearerAuthorization is the Authorization header value for an access
// token from POST /auth/login.
func BearerAuthorization(token string) string {
	return "Bearer " + token
}
