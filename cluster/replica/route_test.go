package replica

import (
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestUnitStream(t *testing.T) {
	tests := []struct {
		unit, want string
		ok         bool
	}{
		{"stream/orders", "orders", true},
		{"group/orders/billing", "orders", true},
		{"group/orders", "", false},
		{"stream/", "", false},
		{"stream/a/b", "", false},
		{"coordinator", "", false},
		{"group//x", "", false},
	}
	for _, tc := range tests {
		got, ok := unitStream(tc.unit)
		if got != tc.want || ok != tc.ok {
			t.Errorf("unitStream(%q) = %q, %v; want %q, %v", tc.unit, got, ok, tc.want, tc.ok)
		}
	}
}

func TestStreamOf(t *testing.T) {
	b := protocol.BasePath
	tests := []struct{ path, want string }{
		{b + "/streams/orders", "orders"},
		{b + "/streams/orders/scale", "orders"},
		{b + "/streams/orders/groups/g/members/m/heartbeat", "orders"},
		{b + "/monitoring/streams/orders/groups/g/members", "orders"},
		{b + "/monitoring/groups", ""},
		{b + "/monitoring/cluster", ""},
		{b + "/auth/login", ""},
		{b + "/streams/bad%20name", ""},
		{b + "/streams/..", ""},
		{"/metrics", ""},
	}
	for _, tc := range tests {
		if got := streamOf(tc.path); got != tc.want {
			t.Errorf("streamOf(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
