package gateway_test

// Black-box tests of the wire as a client written only from the reference
// protocol meets it: what such a client may send that the contract allows,
// and what it expects back.

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// TestLoginBodyWithoutCredentialsUsesBasic: §4 lets a client log in with
// "an empty body with a Basic header". Client libraries that always send a
// JSON body send {} or null for "nothing" (or a login DTO whose members are
// null); the Basic header must still be read, as for an empty body.
func TestLoginBodyWithoutCredentialsUsesBasic(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{TokenTTL: time.Hour}})
	writerBasic := coordtest.Basic(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter))
	tests := []struct {
		name   string
		body   string
		header string
		status int
		code   protocol.ErrorCode
	}{
		{"empty object", `{}`, writerBasic, http.StatusOK, ""},
		{"null", `null`, writerBasic, http.StatusOK, ""},
		{"null members", `{"username":null,"password":null}`, writerBasic, http.StatusOK, ""},
		{"empty members", `{"username":"","password":""}`, writerBasic, http.StatusOK, ""},
		{"unknown members only", `{"rememberMe":true}`, writerBasic, http.StatusOK, ""},
		{"empty object, wrong basic", `{}`, coordtest.Basic(coordtest.UserWriter, "nope"), http.StatusUnauthorized, protocol.CodeUnauthorized},
		{"empty object, no header", `{}`, "", http.StatusUnauthorized, protocol.CodeUnauthorized},
		{"half a body still refused", `{"username":"writer"}`, writerBasic, http.StatusBadRequest, protocol.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, raw := send(t, s.URL, http.MethodPost, base+"/auth/login", tc.body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, raw)
			}
			if tc.status != http.StatusOK {
				var eb protocol.ErrorBody
				if err := json.Unmarshal(raw, &eb); err != nil || eb.ErrorCode != tc.code {
					t.Fatalf("body %s, want %s", raw, tc.code)
				}
				if status == http.StatusUnauthorized && hdr.Get("WWW-Authenticate") != `Basic realm="rscoord"` {
					t.Fatalf("401 without the Basic challenge")
				}
				return
			}
			var resp protocol.LoginResponse
			if err := json.Unmarshal(raw, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.AccessToken == "" || resp.TokenType != "Bearer" || len(resp.Roles) != 1 || resp.Roles[0] != "WRITE" {
				t.Fatalf("login answer %s", raw)
			}
		})
	}
}
