package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// crossSite sends what a page on another site can make a browser send
// without a CORS preflight: a POST with no Content-Type (fetch with no
// body, or a Blob body of no type, in no-cors mode) whose body is JSON all
// the same, carrying the Basic credentials the browser cached for this
// host after its password dialog. origin and fetchSite are the headers the
// browser adds (empty: left out, as an older browser does for Sec-Fetch-Site).
func crossSite(t *testing.T, url, path, body, authorization, origin, fetchSite string) (int, []byte) {
	t.Helper()
	return crossSiteMethod(t, http.MethodPost, url, path, body, authorization, origin, fetchSite)
}

// crossSiteMethod is crossSite with another method: a GET is what an
// <img> or <script> tag on any page makes the browser send, with the same
// cached credentials and no preflight.
func crossSiteMethod(t *testing.T, method, url, path, body, authorization, origin, fetchSite string) (int, []byte) {
	t.Helper()
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if fetchSite != "" {
		req.Header.Set("Sec-Fetch-Site", fetchSite)
	}
	status, _, raw := roundTrip(t, req)
	return status, raw
}

// TestCrossSiteRequestsRefused: a page on another site cannot make an
// operator's browser create, scale or administer anything, neither with
// the Basic credentials the browser cached nor on a server without
// authentication (--no-auth, local development): a browser's cross-origin
// POST is 403 FORBIDDEN with the §3 body before it is read. Same-origin
// calls (the console) and clients that are not browsers (no Origin, no
// Sec-Fetch-Site: the reference clients) are served as before.
func TestCrossSiteRequestsRefused(t *testing.T) {
	t.Parallel()
	admin := coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	for _, tc := range []struct {
		name string
		auth *coordtest.Auth
	}{{"auth", &coordtest.Auth{}}, {"no-auth", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := serveFake(t, newFake(), fakeOptions{Auth: tc.auth != nil})
			authorization := ""
			if tc.auth != nil {
				authorization = admin
			}
			for _, c := range []struct {
				name, stream, origin, fetchSite string
				want                            int
			}{
				{"cross-site", "evil1", "https://evil.example", "cross-site", http.StatusForbidden},
				{"same-site", "evil2", "https://sub.evil.example", "same-site", http.StatusForbidden},
				{"origin only", "evil3", "https://evil.example", "", http.StatusForbidden},
				{"same origin", "good1", s.URL, "same-origin", http.StatusCreated},
				{"same origin, no fetch metadata", "good2", s.URL, "", http.StatusCreated},
				{"not a browser", "good3", "", "", http.StatusCreated},
			} {
				status, raw := crossSite(t, s.URL, base+"/streams/"+c.stream, `{"shardCount":3,"requestedBy":"x"}`,
					authorization, c.origin, c.fetchSite)
				if status != c.want {
					t.Errorf("%s: %d, want %d: %s", c.name, status, c.want, raw)
					continue
				}
				if status == http.StatusForbidden {
					var body protocol.ErrorBody
					if err := json.Unmarshal(raw, &body); err != nil || body.ErrorCode != protocol.CodeForbidden {
						t.Errorf("%s: body %s is not a FORBIDDEN error body (%v)", c.name, raw, err)
					}
				}
			}
			// Nothing a refused request asked for happened: the streams
			// they named do not exist yet.
			for _, stream := range []string{"evil1", "evil2", "evil3"} {
				if status, raw := crossSite(t, s.URL, base+"/streams/"+stream, `{"shardCount":3,"requestedBy":"x"}`,
					authorization, "", ""); status != http.StatusCreated {
					t.Errorf("stream %s after a refused cross-site create: %d: %s", stream, status, raw)
				}
			}
		})
	}
}

// TestCrossSiteGetsWithEffectsRefused: an <img> on any page makes the
// browser send a GET with the Basic credentials it cached, no preflight
// needed. GETs that cost or change something are refused cross-site like
// POSTs: the profiles of /debug/pprof (a CPU profile or trace holds the
// one profiler of the process for seconds and blocks the operator's own;
// heap?gc=1 forces a collection) and the producer routing (with
// --auto-create-groups it registers the group it names). The same GETs
// from the same origin, from a user's own navigation (none) or from a
// client that is not a browser are served.
func TestCrossSiteGetsWithEffectsRefused(t *testing.T) {
	admin := coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	t.Parallel()
	profiling(t)
	f := newFake("orders")
	f.autoCreate = true
	s := serveFake(t, f, fakeOptions{Auth: true})
	// Each path is asked cross-site first, then as allowed; a path that
	// registers something names a new group each time.
	paths := []struct{ name, path string }{
		{"cpu profile", "/debug/pprof/profile?seconds=1"},
		{"trace", "/debug/pprof/trace?seconds=0.1"},
		{"heap with gc", "/debug/pprof/heap?gc=1"},
		{"index", "/debug/pprof/"},
		{"producer routing", base + "/streams/orders/groups/%s/producer-routing"},
	}
	for _, p := range paths {
		for i, c := range []struct {
			name, origin, fetchSite string
			want                    int
		}{
			{"cross-site", "", "cross-site", http.StatusForbidden},
			{"same-site", "", "same-site", http.StatusForbidden},
			{"origin only", "https://evil.example", "", http.StatusForbidden},
			{"same origin", s.URL, "same-origin", http.StatusOK},
			{"navigation", "", "none", http.StatusOK},
			{"not a browser", "", "", http.StatusOK},
		} {
			path := p.path
			group := fmt.Sprintf("g%d", i)
			if strings.Contains(path, "%s") {
				path = fmt.Sprintf(path, group)
			}
			status, raw := crossSiteMethod(t, http.MethodGet, s.URL, path, "", admin, c.origin, c.fetchSite)
			if status != c.want {
				t.Errorf("%s, %s: %d, want %d: %.200s", p.name, c.name, status, c.want, raw)
				continue
			}
			if status == http.StatusForbidden {
				var body protocol.ErrorBody
				if err := json.Unmarshal(raw, &body); err != nil || body.ErrorCode != protocol.CodeForbidden {
					t.Errorf("%s, %s: body %.200s is not a FORBIDDEN error body (%v)", p.name, c.name, raw, err)
				}
				if strings.Contains(p.path, "%s") {
					// The refused routing registered nothing.
					if st, raw := s.Do(http.MethodGet, base+"/streams/orders/groups/"+group, nil); st != http.StatusNotFound {
						t.Errorf("%s, %s: group %s after the refusal: %d %.200s", p.name, c.name, group, st, raw)
					}
				}
			}
		}
	}
	// Reads without effects stay readable by any GET (the answer cannot be
	// read cross-origin anyway: no CORS is granted).
	if status, raw := crossSiteMethod(t, http.MethodGet, s.URL, base+"/monitoring/session", "", admin, "", "cross-site"); status != http.StatusOK {
		t.Errorf("session cross-site: %d %.200s", status, raw)
	}
}
