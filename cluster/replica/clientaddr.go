package replica

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// peerKey signs the client address a replica forwards with (the value of
// clientAddressHeader) and checks the ones it is given. Every replica of a
// cluster shares the token secret (RSCOORD_TOKEN_SECRET: tokens issued by
// one are honoured by all), so the key is derived from it: a client that
// does not know the secret cannot make a replica believe it comes from
// another address. The signature also covers the forwarding headers the
// forwarding replica received (forwardedHeaders), which name the client
// when the address is a trusted proxy's: a signed header replayed with
// other forwarding headers is refused. A nil *peerKey signs nothing and
// trusts nothing.
type peerKey struct {
	key []byte
}

// clientAddressMaxAge bounds how old (or how far ahead, for clock skew) a
// signed client address may be: a replayed header is useless after it.
const clientAddressMaxAge = 30 * time.Second

// newPeerKey derives the key from the token secret; nil without one.
func newPeerKey(secret []byte) *peerKey {
	if len(secret) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("rscoord forwarded client address v2"))
	return &peerKey{key: mac.Sum(nil)}
}

// forwardedHeaders are the forwarding headers of a request as one replica
// received it from its client: X-Forwarded-For's hops, trimmed and joined
// by commas (proxies differ in the spaces they put between them), and
// X-Real-IP.
type forwardedHeaders struct {
	forwardedFor, realIP string
}

// forwardedOf reads h's forwarding headers.
func forwardedOf(h http.Header) forwardedHeaders {
	var hops []string
	for _, v := range h.Values(forwardedForHeader) {
		for hop := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(hop))
		}
	}
	return forwardedHeaders{forwardedFor: strings.Join(hops, ","), realIP: h.Get(realIPHeader)}
}

func (k *peerKey) mac(addr string, unix int64, fwd forwardedHeaders) string {
	mac := hmac.New(sha256.New, k.key)
	for _, field := range []string{addr, strconv.FormatInt(unix, 10), fwd.forwardedFor, fwd.realIP} {
		mac.Write([]byte(field))
		mac.Write([]byte{0})
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// sign is the header value naming addr (a host:port) at now, for a request
// that came with the forwarding headers fwd.
func (k *peerKey) sign(addr string, fwd forwardedHeaders, now time.Time) (string, bool) {
	if k == nil || strings.ContainsAny(addr, " \r\n") {
		return "", false
	}
	unix := now.Unix()
	return addr + " " + strconv.FormatInt(unix, 10) + " " + k.mac(addr, unix, fwd), true
}

// claimed is the address v names, before any check.
func claimed(v string) string {
	addr, _, _ := strings.Cut(v, " ")
	return addr
}

// verify returns the address v names when its signature is right for the
// forwarding headers fwd and it is recent.
func (k *peerKey) verify(v string, fwd forwardedHeaders, now time.Time) (string, bool) {
	if k == nil {
		return "", false
	}
	parts := strings.Split(v, " ")
	if len(parts) != 3 {
		return "", false
	}
	addr, at, sig := parts[0], parts[1], parts[2]
	unix, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return "", false
	}
	if age := now.Sub(time.Unix(unix, 0)); age > clientAddressMaxAge || age < -clientAddressMaxAge {
		return "", false
	}
	if !hmac.Equal([]byte(sig), []byte(k.mac(addr, unix, fwd))) {
		return "", false
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", false
	}
	return addr, true
}
