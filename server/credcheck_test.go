package server

import (
	"bytes"
	"encoding/base64"
	"net/http/httptest"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
)

// The pre-routing check of credentials, beside the etcd test of its use
// (TestClusterRequestsWithoutGoodCredentialsReadNothing).
func TestCredentialCheck(t *testing.T) {
	hash, err := auth.HashPassword("pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.New(auth.Config{Users: []auth.User{{Username: "ops", PasswordHash: hash, Roles: auth.Read}},
		Secret: bytes.Repeat([]byte{7}, auth.MinSecretBytes)})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := authn.Issue(auth.Principal{Username: "ops", Roles: auth.Read})
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.New(auth.Config{Users: []auth.User{{Username: "ops", PasswordHash: hash, Roles: auth.Read}},
		Secret: bytes.Repeat([]byte{8}, auth.MinSecretBytes)})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.Issue(auth.Principal{Username: "ops", Roles: auth.Read})
	if err != nil {
		t.Fatal(err)
	}
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	group := protocol.BasePath + "/streams/made-up/groups/g"
	beat := group + "/members/m/heartbeat"
	tests := []struct {
		name         string
		check        credentialCheck
		path, header string
		want         bool
	}{
		{"auth off", credentialCheck{}, group, "", true},
		{"no credentials", credentialCheck{authn: authn, memberAuth: true}, group, "", false},
		{"unknown scheme", credentialCheck{authn: authn, memberAuth: true}, group, "Digest x", false},
		{"basic not base64", credentialCheck{authn: authn, memberAuth: true}, group, "Basic %%%", false},
		{"basic without a user", credentialCheck{authn: authn, memberAuth: true}, group, basic(":pw"), false},
		{"basic without a colon", credentialCheck{authn: authn, memberAuth: true}, group, basic("ops"), false},
		{"basic, password left to the gateway", credentialCheck{authn: authn, memberAuth: true}, group, basic("ops:wrong"), true},
		{"basic, any case", credentialCheck{authn: authn, memberAuth: true}, group, "bAsIc " + base64.StdEncoding.EncodeToString([]byte("ops:pw")), true},
		{"token of this cluster", credentialCheck{authn: authn, memberAuth: true}, group, "Bearer " + tok.Value, true},
		{"token of another secret", credentialCheck{authn: authn, memberAuth: true}, group, "Bearer " + forged.Value, false},
		{"garbage token", credentialCheck{authn: authn, memberAuth: true}, group, "Bearer x.y.z", false},
		{"heartbeat without member auth", credentialCheck{authn: authn}, beat, "", true},
		{"heartbeat with member auth", credentialCheck{authn: authn, memberAuth: true}, beat, "", false},
		{"admin route without member auth", credentialCheck{authn: authn}, group, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", tc.path, nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			if got := tc.check.credible(r); got != tc.want {
				t.Fatalf("credible = %v, want %v", got, tc.want)
			}
		})
	}
}
