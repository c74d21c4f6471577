package gateway

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// The client address read once per connection is the one gin reads for
// every request: it follows a peer address that changes between the
// connection's requests (a forwarding replica), and the forwarding headers
// of a trusted proxy or of a unix socket's peer.
func TestClientAddressIsGinsOnEveryRequestOfAConnection(t *testing.T) {
	type step struct{ remote, forwardedFor, want string }
	tcp := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	unix := &net.UnixAddr{Name: "/run/rscoord.sock", Net: "unix"}
	cases := []struct {
		name    string
		proxies []string
		local   net.Addr
		steps   []step
	}{
		{"no proxy trusted", nil, tcp, []step{
			{"10.0.0.1:5000", "192.0.2.7", "10.0.0.1"},
			{"10.0.0.1:5000", "192.0.2.8", "10.0.0.1"},
			{"10.0.0.2:6000", "", "10.0.0.2"},
			{"[2001:db8::1]:80", "", "2001:db8::1"},
			{"10.0.0.2:6000", "", "10.0.0.2"},
		}},
		{"a trusted proxy", []string{"10.0.0.1"}, tcp, []step{
			{"10.0.0.1:5000", "192.0.2.7", "192.0.2.7"},
			{"10.0.0.1:5000", "192.0.2.8", "192.0.2.8"},
			{"10.0.0.9:5000", "192.0.2.8", "10.0.0.9"},
		}},
		{"a unix socket", nil, unix, []step{
			{"@", "192.0.2.7", "192.0.2.7"},
			{"@", "192.0.2.8", "192.0.2.8"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{opts: Options{TrustedProxies: tc.proxies}, log: slog.New(slog.DiscardHandler)}
			engine := gin.New()
			s.trustProxies(engine)
			ctx := context.WithValue(context.Background(), gateConnKey{}, &gateConn{})
			ctx = context.WithValue(ctx, http.LocalAddrContextKey, tc.local)
			for i, st := range tc.steps {
				c := gin.CreateTestContextOnly(httptest.NewRecorder(), engine)
				c.Request = httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
				c.Request.RemoteAddr = st.remote
				if st.forwardedFor != "" {
					c.Request.Header.Set("X-Forwarded-For", st.forwardedFor)
				}
				if got, gins := s.clientIP(c), c.ClientIP(); got != st.want || gins != st.want {
					t.Fatalf("request %d from %s: client %q, gin reads %q, want %q", i, st.remote, got, gins, st.want)
				}
			}
		})
	}
}
