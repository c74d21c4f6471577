package auth

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestParseBasicDecodesPaddedUnpaddedAndLong: Basic credentials decode
// with or without padding, short (on the stack) or long, and malformed
// ones or ones naming no user are refused.
func TestParseBasicDecodesPaddedUnpaddedAndLong(t *testing.T) {
	long := strings.Repeat("p", 400)
	for _, tc := range []struct {
		name, credentials, user, password string
		ok                                bool
	}{
		{"padded", base64.StdEncoding.EncodeToString([]byte("member:pw")), "member", "pw", true},
		{"unpadded", base64.RawStdEncoding.EncodeToString([]byte("member:pw")), "member", "pw", true},
		{"colon in password", base64.StdEncoding.EncodeToString([]byte("a:b:c")), "a", "b:c", true},
		{"long", base64.StdEncoding.EncodeToString([]byte("member:" + long)), "member", long, true},
		{"long unpadded", base64.RawStdEncoding.EncodeToString([]byte("member:" + long + "x")), "member", long + "x", true},
		{"not base64", "!!!", "", "", false},
		{"long not base64", strings.Repeat("!", 400), "", "", false},
		{"no colon", base64.StdEncoding.EncodeToString([]byte("member")), "", "", false},
		{"no user", base64.StdEncoding.EncodeToString([]byte(":pw")), "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, password, ok := ParseBasic(tc.credentials)
			if ok != tc.ok || ok && (user != tc.user || password != tc.password) {
				t.Fatalf("ParseBasic = %q, %q, %v; want %q, %q, %v", user, password, ok, tc.user, tc.password, tc.ok)
			}
		})
	}
}
