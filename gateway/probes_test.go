package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/redisops"
)

// TestProbes checks /healthz and /readyz: no credentials, no details, and
// readiness following the extra check but not Redis, whose loss the
// health answer reports instead.
func TestProbes(t *testing.T) {
	t.Parallel()
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

	// Redis gone: still ready (heartbeats do not need it), and health
	// says Redis is DOWN.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	probe("/readyz", http.StatusOK, `{"status":"READY"}`)
	probe("/healthz", http.StatusOK, `{"status":"UP"}`)
	var h protocol.Health
	s.JSON(http.MethodGet, coordclient.MonitoringPath("health"), nil, http.StatusOK, &h)
	if h.RedisDetail.Status != protocol.HealthDown || h.Redis != protocol.HealthDown || h.Status != protocol.HealthDegraded {
		t.Errorf("health with Redis gone: %+v, want redis DOWN and DEGRADED", h)
	}
}

// TestProbesAnswerHEAD checks that the probes answer HEAD, which some load
// balancers send, as they answer GET but without a body, and without
// credentials; other methods stay 405.
func TestProbesAnswerHEAD(t *testing.T) {
	t.Parallel()
	var notReady atomic.Bool
	s := coordtest.Start(t, "", coordtest.Options{
		Auth: &coordtest.Auth{},
		Gateway: gateway.Options{Ready: func(context.Context) error {
			if notReady.Load() {
				return errors.New("not yet")
			}
			return nil
		}},
	})
	for _, tc := range []struct {
		method, path string
		notReady     bool
		want         int
	}{
		{http.MethodHead, "/healthz", false, http.StatusOK},
		{http.MethodHead, "/readyz", false, http.StatusOK},
		{http.MethodHead, "/readyz", true, http.StatusServiceUnavailable},
		{http.MethodHead, "/healthz", true, http.StatusOK},
		{http.MethodPut, "/healthz", false, http.StatusMethodNotAllowed},
		{http.MethodDelete, "/readyz", false, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			notReady.Store(tc.notReady)
			status, hdr, raw := send(t, s.URL, tc.method, tc.path, "", "")
			if status != tc.want {
				t.Fatalf("%d %s, want %d", status, raw, tc.want)
			}
			if tc.method == http.MethodHead && (len(raw) != 0 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json")) {
				t.Errorf("HEAD answer: body %q, Content-Type %q; want no body and GET's JSON type", raw, hdr.Get("Content-Type"))
			}
			if status == http.StatusMethodNotAllowed {
				if allow := hdr.Get("Allow"); !strings.Contains(allow, http.MethodHead) {
					t.Errorf("Allow %q lacks HEAD", allow)
				}
				errorBody(t, tc.method+" "+tc.path, raw, protocol.CodeMethodNotAllowed)
			}
		})
	}
}
