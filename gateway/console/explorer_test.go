package console_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rscoord/rscoord/coordtest"
)

// TestAPIExplorerRendersOurOperations opens the embedded API explorer in
// headless Chromium under its policy and sees our operations listed, then
// checks the reference design's other paths: the document as JSON and
// the actuator probes.
func TestAPIExplorerRendersOurOperations(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})

	ctx := headless(t, browser, 60*time.Second)
	health := chromedp.ID("operations-monitoring-getHealth")
	for _, step := range []chromedp.Action[chromedp.Void]{chromedp.Navigate(s.URL + "/scalar"), chromedp.WaitVisible(health)} {
		if err := chromedp.Do(ctx, step); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("the explorer did not render getHealth: %v %v", err, body)
		}
	}
	count, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".opblock").length`))
	if err != nil {
		t.Fatal(err)
	}
	if count < 40 {
		t.Fatalf("the explorer lists %d operations, want every one of ours", count)
	}

	get := func(path, authorization, acceptEncoding string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		// An explicit Accept-Encoding turns off the transport's own
		// decompression, so that the answer is seen as sent.
		req.Header.Set("Accept-Encoding", acceptEncoding)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	read := func(r io.Reader) string {
		raw, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for _, path := range []string{"/scalar", "/swagger-ui.html", "/swagger-ui/index.html"} {
		resp := get(path, "", "identity")
		if body := read(resp.Body); resp.StatusCode != http.StatusOK || !strings.Contains(body, "swagger-ui-bundle.js") ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, body)
		}
	}
	var zr *gzip.Reader
	gz := get("/swagger-ui/swagger-ui-bundle.js", "", "gzip")
	zr, err = gzip.NewReader(gz.Body)
	if err != nil || gz.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("bundle with gzip: %v %q", err, gz.Header.Get("Content-Encoding"))
	}
	plain := get("/swagger-ui/swagger-ui-bundle.js", "", "identity")
	if a, b := read(zr), read(plain.Body); a != b || !strings.Contains(b, "SwaggerUIBundle") || plain.Header.Get("Content-Encoding") != "" {
		t.Errorf("the bundle differs between gzip and identity (%d, %d bytes)", len(a), len(b))
	}
	if resp := get("/swagger-ui/nope.js", "", "identity"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing file: %d", resp.StatusCode)
	}

	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	resp := get("/v3/api-docs", "", "identity")
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK || doc.Paths["/coord/v1/monitoring/health"] == nil {
		t.Fatalf("GET /v3/api-docs: %d %v %s", resp.StatusCode, err, doc.OpenAPI)
	}
	if resp := get("/actuator/health", "", "identity"); resp.StatusCode != http.StatusOK || strings.TrimSpace(read(resp.Body)) != `{"status":"UP"}` {
		t.Errorf("GET /actuator/health: %d", resp.StatusCode)
	}
	if resp := get("/actuator/info", "", "identity"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /actuator/info without credentials: %d, want 401", resp.StatusCode)
	}
	reader := coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader))
	if resp := get("/actuator/info", reader, "identity"); resp.StatusCode != http.StatusOK || !strings.Contains(read(resp.Body), `"build"`) {
		t.Errorf("GET /actuator/info: %d", resp.StatusCode)
	}
}
