package main

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/rscoord/rscoord/gateway/auth"
)

// credentialCheck tells the cluster mode's routing, before the gateway
// authenticates a request, whether its credentials can be good: every
// replica shares the users file and the token secret, so a replica knows
// that on its own. A request that certainly fails authentication is
// answered by the replica it reached (401), without the etcd read that
// routing a stream nobody holds costs (replica.route).
//
// Basic credentials count as possibly good when well formed: their
// password is checked by the gateway only, where the per-address failure
// limit applies before the bcrypt comparison; a check here would let
// anyone spend a comparison per request past that limit.
type credentialCheck struct {
	// authn is nil when authentication is off: every request is good.
	authn *auth.Authenticator
	// memberAuth: heartbeats need credentials too.
	memberAuth bool
}

// credible reports whether r's credentials may be good.
func (c credentialCheck) credible(r *http.Request) bool {
	if c.authn == nil || (!c.memberAuth && heartbeatPath.MatchString(r.URL.Path)) {
		return true
	}
	scheme, value, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	value = strings.TrimSpace(value)
	switch {
	case strings.EqualFold(scheme, "basic"):
		return wellFormedBasic(value)
	case strings.EqualFold(scheme, "bearer"):
		_, err := c.authn.VerifyToken(value)
		return err == nil
	}
	return false
}

// wellFormedBasic reports whether value is user:password in base64 with a
// user, as the gateway accepts it.
func wellFormedBasic(value string) bool {
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(value); err != nil {
			return false
		}
	}
	user, _, ok := strings.Cut(string(raw), ":")
	return ok && user != ""
}
