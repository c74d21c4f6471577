package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/coordtest"
)

// TestPprofAdminOnly checks /debug/pprof: 401 without credentials, 403 for
// every role but ADMIN, and the real profiles for ADMIN.
func TestPprofAdminOnly(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	cred := func(user string) string { return coordtest.Basic(user, coordtest.Password(user)) }
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"none", "", http.StatusUnauthorized},
		{"wrong password", coordtest.Basic(coordtest.UserAdmin, "nope"), http.StatusUnauthorized},
		{"reader", cred(coordtest.UserReader), http.StatusForbidden},
		{"monitor", cred(coordtest.UserMonitor), http.StatusForbidden},
		{"writer", cred(coordtest.UserWriter), http.StatusForbidden},
		{"member", cred(coordtest.UserMember), http.StatusForbidden},
		{"admin", cred(coordtest.UserAdmin), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
				status, _, raw := send(t, s.URL, http.MethodGet, path, "", tc.authorization)
				if status != tc.want {
					t.Fatalf("GET %s as %s: %d, want %d: %.200s", path, tc.name, status, tc.want, raw)
				}
				if status != http.StatusOK && strings.Contains(string(raw), "goroutine") {
					t.Fatalf("GET %s as %s leaked a profile: %.200s", path, tc.name, raw)
				}
			}
		})
	}
	admin := cred(coordtest.UserAdmin)
	for _, tc := range []struct {
		path, want string
		status     int
	}{
		{"/debug/pprof/", "goroutine", http.StatusOK},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile: total", http.StatusOK},
		{"/debug/pprof/heap?debug=1", "heap profile:", http.StatusOK},
		{"/debug/pprof/symbol", "num_symbols", http.StatusOK},
		{"/debug/pprof/profile?seconds=1", "", http.StatusOK},
		{"/debug/pprof/no-such-profile", `"errorCode":"NOT_FOUND"`, http.StatusNotFound},
	} {
		status, _, raw := send(t, s.URL, http.MethodGet, tc.path, "", admin)
		if status != tc.status || !strings.Contains(string(raw), tc.want) || len(raw) == 0 {
			t.Errorf("GET %s as admin: %d %.200q, want %d containing %q", tc.path, status, raw, tc.status, tc.want)
		}
	}
}
