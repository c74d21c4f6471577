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
	// Credentials of usual length are decoded on the stack: clients that
	// send Basic on every call (the JVM starter) parse it per request, and
	// the decoded bytes would be garbage besides the string made of them.
	var in, out [basicOnStack]byte
	var raw []byte
	if len(credentials) <= len(in) {
		src := in[:copy(in[:], credentials)]
		n, err := base64.StdEncoding.Decode(out[:], src)
		if err != nil {
			n, err = base64.RawStdEncoding.Decode(out[:], src)
			if err != nil {
				return "", "", false
			}
		}
		raw = out[:n]
	} else {
		var err error
		raw, err = base64.StdEncoding.DecodeString(credentials)
		if err != nil {
			raw, err = base64.RawStdEncoding.DecodeString(credentials)
			if err != nil {
				return "", "", false
			}
		}
	}
	user, password, ok = strings.Cut(string(raw), ":")
	return user, password, ok && user != ""
}

// basicOnStack is the longest Basic credentials ParseBasic decodes on the
// stack.
const basicOnStack = 256
