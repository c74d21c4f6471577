package gateway_test

import (
	"encoding/json"
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
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
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
	admin := coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	for _, tc := range []struct {
		name string
		auth *coordtest.Auth
	}{{"auth", &coordtest.Auth{}}, {"no-auth", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			s := coordtest.Start(t, "", coordtest.Options{Auth: tc.auth})
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
