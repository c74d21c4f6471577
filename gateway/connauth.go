package gateway

import (
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/rscoord/rscoord/gateway/auth"
)

// basicMemo is the Basic Authorization header of a connection's request
// that checked out, the principal it names and until when the check holds
// (the verified-credentials cache's time for it). A client that sends
// Basic on every request of a keep-alive connection, as members do on
// every heartbeat, is then known by comparing one string instead of an
// HMAC of its credentials and a lookup in the shared cache.
type basicMemo struct {
	header string
	p      auth.Principal
	until  time.Time
}

// recallBasic is the principal of header when r's connection checked the
// same header before and the check still holds at now. The comparison
// takes the same time wherever the headers differ: behind a proxy one
// connection may carry requests of several clients.
func recallBasic(r *http.Request, header string, now time.Time) (auth.Principal, bool) {
	gc, _ := r.Context().Value(gateConnKey{}).(*gateConn)
	if gc == nil {
		return auth.Principal{}, false
	}
	m := gc.basic.Load()
	if m == nil || !now.Before(m.until) || len(m.header) != len(header) ||
		subtle.ConstantTimeCompare([]byte(m.header), []byte(header)) != 1 {
		return auth.Principal{}, false
	}
	return m.p, true
}

// rememberBasic keeps header as the credentials r's connection checked,
// naming p, until the check's time runs out.
func rememberBasic(r *http.Request, header string, p auth.Principal, until time.Time) {
	if gc, _ := r.Context().Value(gateConnKey{}).(*gateConn); gc != nil {
		gc.basic.Store(&basicMemo{header: header, p: p, until: until})
	}
}
