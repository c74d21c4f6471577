package persistence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"
)

// APITokenRecord is one long-lived API token as the store keeps it: the
// SHA-256 of its secret, never the secret. A record is written once, when
// the token is created, and deleted when it is revoked; it is never
// changed in place, so that replicas sharing an etcd store need no fence
// for it (a create is conditioned on the name being free instead).
type APITokenRecord struct {
	// Name is unique among the API tokens of the store.
	Name string
	// Username is the user the token authenticates as.
	Username string
	// SecretHash is the SHA-256 of the token's secret part.
	SecretHash []byte
	// CreatedAt is when the token was created (UTC).
	CreatedAt time.Time
	// CreatedBy is the principal that created it.
	CreatedBy string
	// ExpiresAt is when the token stops working; zero: never.
	ExpiresAt time.Time
	// Err is set, on load only, when the stored record does not decode
	// (it wraps [ErrCorrupt] or [ErrUnknownSchema]); only Name is set then.
	Err error
}

// APITokens keeps API tokens. Every store of this package implements it
// (the Pebble, etcd and memory stores); it is apart from [Store] so that
// code that needs no tokens sees none of it.
type APITokens interface {
	// CreateAPIToken stores rec under rec.Name, refusing with
	// [ErrAPITokenExists] when that name is taken (also when another
	// replica took it at the same time). Synced before it returns.
	CreateAPIToken(ctx context.Context, rec APITokenRecord) error
	// LoadAPIToken returns the token named name, or [ErrNotFound].
	LoadAPIToken(ctx context.Context, name string) (APITokenRecord, error)
	// ListAPITokens returns every token, sorted by name; one that does
	// not decode is listed with Err set.
	ListAPITokens(ctx context.Context) ([]APITokenRecord, error)
	// DeleteAPIToken deletes the token named name: [ErrNotFound] when
	// there is none. Synced before it returns.
	DeleteAPIToken(ctx context.Context, name string) error
}

// ErrAPITokenExists: an API token of that name exists already.
var ErrAPITokenExists = errors.New("persistence: an API token of that name exists")

var _ APITokens = (*core)(nil)

// apiTokenSpace holds the API tokens: "t\x00" + name.
var apiTokenSpace = []byte{'t', sep}

const kindAPIToken = "apitoken"

func apiTokenKey(name string) []byte {
	k := make([]byte, 0, len(apiTokenSpace)+len(name))
	return append(append(k, apiTokenSpace...), name...)
}

func apiTokenBounds() (lower, upper []byte) {
	lower = bytes.Clone(apiTokenSpace)
	upper = bytes.Clone(apiTokenSpace)
	upper[len(upper)-1] = sep + 1
	return lower, upper
}

// isAPITokenKey reports whether k is the key of an API token.
func isAPITokenKey(k []byte) bool { return bytes.HasPrefix(k, apiTokenSpace) }

// apiTokenV1 is the payload of an API token record, schema version 1 of
// its kind.
type apiTokenV1 struct {
	Name       string     `json:"name"`
	Username   string     `json:"username"`
	SecretHash []byte     `json:"secretHash"`
	CreatedAt  time.Time  `json:"createdAt"`
	CreatedBy  string     `json:"createdBy,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
}

// maxAPITokenNameBytes bounds a token's name (it is part of its key).
const maxAPITokenNameBytes = 200

func validAPIToken(rec APITokenRecord) error {
	if rec.Name == "" || len(rec.Name) > maxAPITokenNameBytes || bytes.IndexByte([]byte(rec.Name), sep) >= 0 {
		return errors.New("persistence: API token name must be 1-200 bytes without NUL")
	}
	if rec.Username == "" || len(rec.SecretHash) != 32 || rec.CreatedAt.IsZero() {
		return errors.New("persistence: API token without user, 32-byte secret hash or creation time")
	}
	return nil
}

func encodeAPIToken(rec APITokenRecord) ([]byte, error) {
	if err := validAPIToken(rec); err != nil {
		return nil, err
	}
	v := apiTokenV1{Name: rec.Name, Username: rec.Username, SecretHash: rec.SecretHash,
		CreatedAt: rec.CreatedAt.UTC(), CreatedBy: rec.CreatedBy}
	if !rec.ExpiresAt.IsZero() {
		t := rec.ExpiresAt.UTC()
		v.ExpiresAt = &t
	}
	return json.Marshal(v)
}

func decodeAPITokenValue(v []byte, name string) APITokenRecord {
	env, err := unframe(v, kindAPIToken)
	if err == nil {
		var p apiTokenV1
		if err = strictUnmarshal(env.Payload, &p); err != nil {
			err = newErr(ErrCorrupt, "API token payload: %v", err)
		} else if p.Name != name {
			err = newErr(ErrCorrupt, "API token %q stored under %q", p.Name, name)
		} else {
			rec := APITokenRecord{Name: p.Name, Username: p.Username, SecretHash: p.SecretHash,
				CreatedAt: p.CreatedAt.UTC(), CreatedBy: p.CreatedBy}
			if p.ExpiresAt != nil {
				rec.ExpiresAt = p.ExpiresAt.UTC()
			}
			return rec
		}
	}
	return APITokenRecord{Name: name, Err: opErr("API token "+name, err)}
}

// CreateAPIToken implements [APITokens.CreateAPIToken].
func (c *core) CreateAPIToken(ctx context.Context, rec APITokenRecord) (err error) {
	payload, err := encodeAPIToken(rec)
	if err != nil {
		return err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer exit()
	defer c.recoverFatal(&err)
	key := apiTokenKey(rec.Name)
	// The stripe lock orders creates of one name in this process; the
	// engine's condition (etcd) orders them across replicas.
	st := c.lock(key)
	defer st.mu.Unlock()
	if _, err := c.kv.get(ctx, key); err == nil {
		return opErr("API token "+rec.Name, ErrAPITokenExists)
	} else if !errors.Is(err, errNoKey) {
		return opErr("API token "+rec.Name, err)
	}
	rev := c.revision.Add(1)
	if err := c.commit(ctx, putOp(key, frame(kindAPIToken, rev, payload))); err != nil {
		if _, refused := errors.AsType[*errRefused](err); refused {
			return opErr("API token "+rec.Name, ErrAPITokenExists)
		}
		return opErr("API token "+rec.Name, c.fail(err))
	}
	return nil
}

// LoadAPIToken implements [APITokens.LoadAPIToken].
func (c *core) LoadAPIToken(ctx context.Context, name string) (_ APITokenRecord, err error) {
	exit, err := c.enter(ctx)
	if err != nil {
		return APITokenRecord{}, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	v, err := c.kv.get(ctx, apiTokenKey(name))
	if errors.Is(err, errNoKey) {
		return APITokenRecord{}, opErr("API token "+name, ErrNotFound)
	}
	if err != nil {
		return APITokenRecord{}, opErr("API token "+name, err)
	}
	rec := decodeAPITokenValue(v, name)
	return rec, rec.Err
}

// ListAPITokens implements [APITokens.ListAPITokens].
func (c *core) ListAPITokens(ctx context.Context) (out []APITokenRecord, err error) {
	exit, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	lo, hi := apiTokenBounds()
	out = []APITokenRecord{}
	err = c.kv.scan(ctx, lo, hi, func(k, v []byte) error {
		out = append(out, decodeAPITokenValue(v, string(k[len(apiTokenSpace):])))
		return ctx.Err()
	})
	if err != nil {
		return nil, opErr("list API tokens", err)
	}
	return out, nil
}

// DeleteAPIToken implements [APITokens.DeleteAPIToken].
func (c *core) DeleteAPIToken(ctx context.Context, name string) (err error) {
	exit, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer exit()
	defer c.recoverFatal(&err)
	key := apiTokenKey(name)
	st := c.lock(key)
	defer st.mu.Unlock()
	if _, err := c.kv.get(ctx, key); errors.Is(err, errNoKey) {
		return opErr("API token "+name, ErrNotFound)
	} else if err != nil {
		return opErr("API token "+name, err)
	}
	if err := c.commit(ctx, delOp(key)); err != nil {
		return opErr("API token "+name, c.fail(err))
	}
	return nil
}
