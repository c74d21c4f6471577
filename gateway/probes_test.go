package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/redisops"
)

// TestProbes checks /healthz and /readyz: no credentials, no details, and
// readiness following Redis and the extra check.
func TestProbes(t *testing.T) {
	var notReady atomic.Bool
	srv := redistest.Standalone(t)
	rdb := srv.Client()
	s := coordtest.Start(t, "", coordtest.Options{
		Auth:  &coordtest.Auth{},
		Redis: redisops.Wrap(rdb),
		Gateway: gateway.Options{Ready: func(context.Context) error {
			if notReady.Load() {
				return errors.New("placement: groups still moving")
			}
			return nil
		}},
	})
	anon := s.As("")
	probe := func(path string, wantStatus int, wantBody string) {
		t.Helper()
		status, raw := anon.Do(http.MethodGet, path, nil)
		if status != wantStatus || string(raw) != wantBody {
			t.Errorf("GET %s without credentials: %d %s, want %d %s", path, status, raw, wantStatus, wantBody)
		}
	}
	probe("/healthz", http.StatusOK, `{"status":"UP"}`)
	probe("/readyz", http.StatusOK, `{"status":"READY"}`)

	notReady.Store(true)
	probe("/readyz", http.StatusServiceUnavailable, `{"status":"NOT_READY"}`)
	notReady.Store(false)
	probe("/readyz", http.StatusOK, `{"status":"READY"}`)

	// Redis gone: not ready, and the body says nothing about why.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	probe("/readyz", http.StatusServiceUnavailable, `{"status":"NOT_READY"}`)
	probe("/healthz", http.StatusOK, `{"status":"UP"}`)
}
