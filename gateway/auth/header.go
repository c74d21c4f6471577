package auth

import (
	"encoding/base64"
	"strings"
)

// SplitAuthorization splits an Authorization header into its scheme
// ("Basic", "Bearer", compared without case by the caller) and its
// credentials, both without surrounding spaces.
func SplitAuthorization(header string) (scheme, credentials string) {
	scheme, credentials, _ = strings.Cut(strings.TrimSpace(header), " ")
	return scheme, strings.TrimSpace(credentials)
}

// ParseBasic decodes Basic credentials, base64("user:password"), padding
// optional. ok is false when they are malformed or name no user.
func ParseBasic(credentials string) (user, password string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(credentials)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(credentials)
		if err != nil {
			return "", "", false
		}
	}
	user, password, ok = strings.Cut(string(raw), ":")
	return user, password, ok && user != ""
}
