package main

import (
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

func TestClientURL(t *testing.T) {
	cases := []struct {
		server   string
		segments []string
		want     string
	}{
		{"http://127.0.0.1:8080", []string{"streams", "orders"}, "http://127.0.0.1:8080/coord/v1/streams/orders"},
		{"http://h:1/", []string{"monitoring", "groups"}, "http://h:1/coord/v1/monitoring/groups"},
		{"https://h/proxy/rscoord/", []string{"streams", "o"}, "https://h/proxy/rscoord/coord/v1/streams/o"},
		// Names are validated first, but the client escapes every segment anyway.
		{"http://h", []string{"streams", "a/b", "groups", "c d?e#f%"}, "http://h/coord/v1/streams/a%2Fb/groups/c%20d%3Fe%23f%25"},
		{"http://h", []string{"streams", "orders:v2", "groups", "team@eu"}, "http://h/coord/v1/streams/orders:v2/groups/team@eu"},
	}
	for _, tc := range cases {
		c, err := NewClient(tc.server, time.Second)
		if err != nil {
			t.Fatalf("NewClient(%q): %v", tc.server, err)
		}
		if got := c.base + coordclient.Path(tc.segments...); got != tc.want {
			t.Errorf("url(%q, %q) = %s, want %s", tc.server, tc.segments, got, tc.want)
		}
	}
}

func TestAPIErrorText(t *testing.T) {
	cases := []struct {
		err  APIError
		want string
	}{
		{APIError{StatusCode: 409, Body: protocol.NewErrorBody(protocol.CodeGroupAlreadyExists, "Group already exists")},
			"409 GROUP_ALREADY_EXISTS: Group already exists"},
		{APIError{StatusCode: 429, Body: protocol.NewErrorBody(protocol.CodeRateLimitExceeded, "Slow down"), RetryAfter: 2 * time.Second},
			"429 RATE_LIMIT_EXCEEDED: Slow down (retry after 2s)"},
		{APIError{StatusCode: 502}, "502 Bad Gateway"},
		{APIError{StatusCode: 502, Body: protocol.ErrorBody{Message: "upstream down"}}, "502 Bad Gateway: upstream down"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
