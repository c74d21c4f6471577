package persistence

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

func apiToken(name, user string) APITokenRecord {
	return APITokenRecord{Name: name, Username: user, SecretHash: bytes.Repeat([]byte{7}, 32),
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), CreatedBy: "admin"}
}

// API tokens survive a restart, refuse a second token of one name, are
// listed by name, are gone once deleted, and a deleted name can be used
// again. A value that does not decode is listed with its error.
func testAPITokens(t *testing.T, e engine) {
	s := e.open(t)
	tokens := func(s Store) APITokens { return s.(APITokens) }
	expiring := apiToken("svc-b", "orders")
	expiring.ExpiresAt = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, rec := range []APITokenRecord{expiring, apiToken("svc-a", "orders")} {
		if err := tokens(s).CreateAPIToken(ctx, rec); err != nil {
			t.Fatalf("create %s: %v", rec.Name, err)
		}
	}
	if err := tokens(s).CreateAPIToken(ctx, apiToken("svc-a", "other")); !errors.Is(err, ErrAPITokenExists) {
		t.Fatalf("second create of svc-a: %v, want ErrAPITokenExists", err)
	}
	if err := tokens(s).CreateAPIToken(ctx, APITokenRecord{Name: "x"}); err == nil {
		t.Fatal("a record without user and hash was stored")
	}
	s = e.reopen(t, s)
	list, err := tokens(s).ListAPITokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "svc-a" || list[1].Name != "svc-b" {
		t.Fatalf("list = %+v, want svc-a, svc-b", list)
	}
	got, err := tokens(s).LoadAPIToken(ctx, "svc-b")
	if err != nil || got.Username != "orders" || !got.ExpiresAt.Equal(expiring.ExpiresAt) ||
		!bytes.Equal(got.SecretHash, expiring.SecretHash) || got.CreatedBy != "admin" {
		t.Fatalf("load svc-b = %+v, %v", got, err)
	}
	if !list[0].ExpiresAt.IsZero() {
		t.Fatalf("svc-a expires at %v, want never", list[0].ExpiresAt)
	}
	if err := tokens(s).DeleteAPIToken(ctx, "svc-a"); err != nil {
		t.Fatal(err)
	}
	if err := tokens(s).DeleteAPIToken(ctx, "svc-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := tokens(s).LoadAPIToken(ctx, "svc-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load after delete: %v, want ErrNotFound", err)
	}
	if err := tokens(s).CreateAPIToken(ctx, apiToken("svc-a", "orders")); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	if err := rawKV(s).commit(ctx, []op{putOp(apiTokenKey("svc-c"), []byte("garbage"))}); err != nil {
		t.Fatal(err)
	}
	list, err = tokens(s).ListAPITokens(ctx)
	if err != nil || len(list) != 3 || !errors.Is(list[2].Err, ErrCorrupt) {
		t.Fatalf("list with a damaged token = %+v, %v", list, err)
	}
	if _, err := tokens(s).LoadAPIToken(ctx, "svc-c"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("load of a damaged token: %v, want ErrCorrupt", err)
	}
}

// Two replicas creating one token name at once: exactly one wins, and the
// other is told the name is taken.
func TestEtcdAPITokenCreateRace(t *testing.T) {
	e := etcdEngine(t)
	a := e.open(t)
	b, err := OpenEtcd(context.Background(), EtcdOptions{Client: rawKV(a).(*etcdKV).opts.Client, Prefix: rawKV(a).(*etcdKV).opts.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for round := range 5 {
		name := "race-" + string(rune('a'+round))
		errs := make(chan error, 2)
		for _, s := range []APITokens{a.(APITokens), b} {
			go func() { errs <- s.CreateAPIToken(context.Background(), apiToken(name, "u")) }()
		}
		won := 0
		for range 2 {
			switch err := <-errs; {
			case err == nil:
				won++
			case !errors.Is(err, ErrAPITokenExists):
				t.Fatalf("create %s: %v", name, err)
			}
		}
		if won != 1 {
			t.Fatalf("%s: %d creates won, want 1", name, won)
		}
	}
	// The refused create left both stores serving.
	if err := a.Err(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Err(context.Background()); err != nil {
		t.Fatal(err)
	}
}
