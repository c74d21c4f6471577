package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// In the cluster mode API tokens live in etcd: one created through a
// replica works through the other at once, and one revoked through a
// replica is refused by the other within its cache's bound (2 s).
func TestClusterAPITokenAgreement(t *testing.T) {
	t.Parallel()
	start := authReplicas(t)
	r1, r2 := start("r1"), start("r2")
	// Do, not JSON: a token that never expires answers expiresAt null.
	code, raw := asAdmin(t, r1.url).Do(http.MethodPost, protocol.BasePath+"/auth/tokens",
		protocol.APITokenCreateRequest{Username: credtest.AdminUser, Name: "ops-bot", RequestedBy: "test"})
	var created protocol.APITokenCreateResponse
	if err := json.Unmarshal(raw, &created); code != http.StatusCreated || err != nil || created.ExpiresAt != nil {
		t.Fatalf("create through r1: %d %s (%v)", code, raw, err)
	}
	session := protocol.BasePath + "/monitoring/session"
	for _, r := range []*replicaProc{r2, r1} {
		var s protocol.Session
		coordtest.Remote(t, r.url).As("Bearer "+created.Token).JSON(http.MethodGet, session, nil, http.StatusOK, &s)
		if s.Username != credtest.AdminUser {
			t.Fatalf("session through %s: %+v", r.url, s)
		}
	}
	// Refused by r2, where it is revoked, at once; by r1 within the bound.
	if code, raw := asAdmin(t, r2.url).Do(http.MethodDelete, protocol.BasePath+"/auth/tokens/ops-bot", protocol.APITokenRevokeRequest{RequestedBy: "test"}); code != http.StatusNoContent {
		t.Fatalf("revoke through r2: %d %s", code, raw)
	}
	if code, _ := coordtest.Remote(t, r2.url).As("Bearer "+created.Token).Do(http.MethodGet, session, nil); code != http.StatusUnauthorized {
		t.Fatalf("through r2 right after its revocation: %d", code)
	}
	revoked := time.Now()
	if !poll.Wait(10*time.Second, 50*time.Millisecond, func() bool {
		code, _ := coordtest.Remote(t, r1.url).As("Bearer "+created.Token).Do(http.MethodGet, session, nil)
		return code == http.StatusUnauthorized
	}) {
		t.Fatal("r1 still takes the token 10 s after its revocation through r2")
	}
	if took := time.Since(revoked); took > 6*time.Second { // 2 s, with room for a loaded machine
		t.Fatalf("r1 refused the revoked token after %v, past the 2 s bound", took)
	}
}
