package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// remoteIPHeaders are the headers a trusted proxy names the client in, in
// the order they are read: X-Forwarded-For from its right end, past every
// trusted hop, then X-Real-IP. A replica that forwards a request in the
// cluster mode passes both on as they came (package replica).
func remoteIPHeaders() []string { return []string{"X-Forwarded-For", "X-Real-IP"} }

// CheckTrustedProxies reports every entry of Options.TrustedProxies that is
// neither an IP address nor a CIDR, and every entry that trusts all
// addresses (a /0): any client could then name itself any address, and
// pass the per-address limits under names of its choosing.
func CheckTrustedProxies(proxies []string) error {
	var errs []error
	for _, p := range proxies {
		var ipNet *net.IPNet
		if strings.Contains(p, "/") {
			_, n, err := net.ParseCIDR(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q is not a CIDR (such as 10.0.0.0/8 or fd00::/8)", p))
				continue
			}
			ipNet = n
		} else if net.ParseIP(p) == nil {
			errs = append(errs, fmt.Errorf("%q is not an IP address or a CIDR", p))
			continue
		}
		if ipNet != nil {
			if ones, _ := ipNet.Mask.Size(); ones == 0 {
				errs = append(errs, fmt.Errorf("%q trusts every address: any client could claim any address; name the proxies' own addresses or network", p))
			}
		}
	}
	return errors.Join(errs...)
}

// trustProxies makes r read client addresses (rate limits, audit, the
// members API) from the connection, or from the forwarding headers of a
// request whose peer is one of Options.TrustedProxies. Any client can set
// those headers: from a peer not trusted they are ignored. With no proxy
// trusted, gin reads the connection's address and nothing more.
func (s *server) trustProxies(r *gin.Engine) {
	r.TrustedPlatform = ""
	r.ForwardedByClientIP = true
	r.RemoteIPHeaders = remoteIPHeaders()
	proxies := s.opts.TrustedProxies
	if err := CheckTrustedProxies(proxies); err != nil {
		s.log.Error("no proxy is trusted: the trusted proxies are refused", slog.Any("error", err))
		proxies = nil
	}
	if len(proxies) == 0 {
		proxies = nil
	}
	s.peerIsClient = proxies == nil
	if err := r.SetTrustedProxies(proxies); err != nil {
		// Cannot happen: CheckTrustedProxies parses as gin does.
		s.log.Error("no proxy is trusted", slog.Any("error", err))
		_ = r.SetTrustedProxies(nil)
	}
}

// clientMemo is the client address of a peer that is not a trusted proxy:
// the address part of its RemoteAddr, as gin formats it.
type clientMemo struct {
	remote, ip string
}

// clientIP is c.ClientIP(), read once per connection while no proxy is
// trusted: the answer then depends on the peer's address alone, and a
// member sends every heartbeat over the same connection. Parsing and
// formatting the address again was a fiftieth of the server's CPU per
// heartbeat. The memo is keyed by RemoteAddr, which a replica forwarding
// in the cluster mode sets per request. A unix socket's peer is trusted by
// gin, so its requests are always read in full.
func (s *server) clientIP(c *gin.Context) string {
	gc, _ := c.Request.Context().Value(gateConnKey{}).(*gateConn)
	if gc == nil || !s.peerIsClient {
		return c.ClientIP()
	}
	if m := gc.client.Load(); m != nil && m.remote == c.Request.RemoteAddr {
		return m.ip
	}
	ip := c.ClientIP()
	if local, ok := c.Request.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local.Network() == "tcp" {
		gc.client.Store(&clientMemo{remote: c.Request.RemoteAddr, ip: ip})
	}
	return ip
}
