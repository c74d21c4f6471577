package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/gin-gonic/gin"
)

// crossOrigin refuses what a page on another site makes a browser send:
// a POST or DELETE whose Sec-Fetch-Site is not same-origin (or none, a
// user's own navigation), or, from browsers without fetch metadata, whose
// Origin names another host than the request's Host. Such a request needs
// no CORS preflight when it carries no Content-Type (fetch in no-cors mode
// with no body, or a Blob body of no type), readBody accepts a missing
// type, and the browser adds the Basic credentials it cached for this host
// after its password dialog, or none are needed (--no-auth): without this
// check any page an operator opens could create, scale or roll back with
// the operator's rights. Clients that are not browsers send neither
// header and are not affected. A GET gets the same check where it costs or
// changes something (sameOriginOnly): http.CrossOriginProtection passes
// every safe method, so it is asked about the request as if it were a
// POST. The console calls the API from its own origin.
func (s *server) crossOrigin(c *gin.Context) {
	r := c.Request
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		r = r.WithContext(r.Context()) // a shallow copy, to change its method
		r.Method = http.MethodPost
	}
	if err := s.origins.Check(r); err != nil {
		s.forbid(c, "cross-origin request refused: a page of another origin may not call this API from a browser")
		return
	}
	c.Next()
}

// localHostsOnly refuses a request whose Host does not name this machine
// (Options.LocalHostsOnly). A request without Host (HTTP/1.0) is let
// through: browsers always send one.
func (s *server) localHostsOnly(c *gin.Context) {
	if !IsLocalHost(c.Request.Host) {
		s.forbid(c, "this server answers only requests to localhost or a loopback address (authentication is off)")
		return
	}
	c.Next()
}

// IsLocalHost reports whether hostport (a Host header or a listen
// address, port optional) is empty, localhost or a loopback IP address.
func IsLocalHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
