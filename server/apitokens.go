package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/persistence"
)

// apiTokens serves the store's API tokens to the authenticator (reads)
// and to the gateway's /auth/tokens routes. In the cluster mode the store
// is etcd, shared by every replica: a token created through one replica
// works on all, and a revocation is seen by each once its cache of the
// token expires.
type apiTokens struct {
	store persistence.APITokens
}

var (
	_ auth.APITokenSource   = apiTokens{}
	_ gateway.APITokenStore = apiTokens{}
)

// APIToken implements auth.APITokenSource. A record that does not decode
// counts as no token: it fails closed.
func (t apiTokens) APIToken(ctx context.Context, name string) (auth.APIToken, bool, error) {
	rec, err := t.store.LoadAPIToken(ctx, name)
	switch {
	case errors.Is(err, persistence.ErrNotFound), errors.Is(err, persistence.ErrCorrupt), errors.Is(err, persistence.ErrUnknownSchema):
		return auth.APIToken{}, false, nil
	case err != nil:
		return auth.APIToken{}, false, err
	}
	return auth.APIToken{Name: rec.Name, Username: rec.Username, SecretHash: rec.SecretHash, ExpiresAt: rec.ExpiresAt}, true, nil
}

func storeUnavailable(op string, err error) error {
	return fmt.Errorf("%s: %w", op, errors.Join(protocol.Errorf(protocol.CodeStoreUnavailable, "the store could not be read or written; retry later"), err))
}

// CreateAPIToken implements gateway.APITokenStore.
func (t apiTokens) CreateAPIToken(ctx context.Context, tok gateway.StoredAPIToken) error {
	rec := persistence.APITokenRecord{Name: tok.Name, Username: tok.Username, SecretHash: tok.SecretHash,
		CreatedAt: tok.CreatedAt, CreatedBy: tok.CreatedBy}
	if tok.ExpiresAt != nil {
		rec.ExpiresAt = *tok.ExpiresAt
	}
	err := t.store.CreateAPIToken(ctx, rec)
	switch {
	case errors.Is(err, persistence.ErrAPITokenExists):
		return protocol.Errorf(protocol.CodeAPITokenAlreadyExists, "an API token named "+tok.Name+" exists; revoke it first or choose another name")
	case err != nil:
		return storeUnavailable("create API token", err)
	}
	return nil
}

// ListAPITokens implements gateway.APITokenStore. A record that does not
// decode is listed by name alone, so that it can be revoked.
func (t apiTokens) ListAPITokens(ctx context.Context) ([]gateway.StoredAPIToken, error) {
	recs, err := t.store.ListAPITokens(ctx)
	if err != nil {
		return nil, storeUnavailable("list API tokens", err)
	}
	out := make([]gateway.StoredAPIToken, 0, len(recs))
	for _, r := range recs {
		tok := gateway.StoredAPIToken{APIToken: protocol.APIToken{Name: r.Name, Username: r.Username,
			CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy}}
		if !r.ExpiresAt.IsZero() {
			exp := r.ExpiresAt.In(time.UTC)
			tok.ExpiresAt = &exp
		}
		out = append(out, tok)
	}
	return out, nil
}

// DeleteAPIToken implements gateway.APITokenStore.
func (t apiTokens) DeleteAPIToken(ctx context.Context, name string) error {
	err := t.store.DeleteAPIToken(ctx, name)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return protocol.Errorf(protocol.CodeNotFound, "no API token named "+name)
	case err != nil:
		return storeUnavailable("revoke API token", err)
	}
	return nil
}
