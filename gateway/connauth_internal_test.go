package gateway

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rscoord/rscoord/gateway/auth"
)

// A connection recalls credentials only while their check holds, only for
// the very header checked, and only on a connection of NewHTTPServer.
func TestRecalledCredentialsHoldUntilTheirCheckEnds(t *testing.T) {
	const header = "Basic cmVhZGVyOnJlYWRlci1wdw=="
	until := time.Now().Add(time.Minute)
	cases := []struct {
		name, header string
		at           time.Time
		gated        bool
		want         bool
	}{
		{"the same header before the end", header, until.Add(-time.Nanosecond), true, true},
		{"the same header at the end", header, until, true, false},
		{"the same header after the end", header, until.Add(time.Second), true, false},
		{"another header of the same length", header[:len(header)-2] + "=x", until.Add(-time.Second), true, false},
		{"a longer header", header + "x", until.Add(-time.Second), true, false},
		{"a connection not of NewHTTPServer", header, until.Add(-time.Second), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tc.gated {
				r = r.WithContext(context.WithValue(r.Context(), gateConnKey{}, &gateConn{}))
			}
			rememberBasic(r, header, auth.Principal{Username: "reader"}, until)
			p, ok := recallBasic(r, tc.header, tc.at)
			if ok != tc.want || ok && p.Username != "reader" {
				t.Fatalf("recalled %v (%q), want %v", ok, p.Username, tc.want)
			}
		})
	}
}
