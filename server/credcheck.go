package server

import (
	"net/http"
	"strings"

	"github.com/rscoord/rscoord/cluster/replica"
	"github.com/rscoord/rscoord/gateway/auth"
)

// credentialCheck tells the cluster mode's routing, before the gateway
// authenticates a request, whether its credentials can be good: every
// replica shares the users file and the token secret, so a replica knows
// that on its own. A request that certainly fails authentication is
// answered by the replica it reached (401), without the etcd read that
// routing a stream nobody holds costs (the placement routing of cluster/replica).
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
	if c.authn == nil || (!c.memberAuth && replica.IsHeartbeat(r.URL.Path)) {
		return true
	}
	scheme, value := auth.SplitAuthorization(r.Header.Get("Authorization"))
	switch {
	case strings.EqualFold(scheme, "basic"):
		_, _, ok := auth.ParseBasic(value)
		return ok
	case strings.EqualFold(scheme, "bearer") && auth.IsAPIToken(value):
		// Checked by the gateway only: the check reads the store.
		return true
	case strings.EqualFold(scheme, "bearer"):
		_, err := c.authn.VerifyToken(value)
		return err == nil
	}
	return false
}
