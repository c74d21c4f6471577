package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// engine is a gin router with the middleware installed as the gateway
// does: first, before recovery and before any route.
func engine(m *metrics.Metrics) *gin.Engine {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(m.HTTPMiddleware())
	r.Use(gin.RecoveryWithWriter(io.Discard))
	r.GET("/streams/:prefix", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.POST("/streams/:prefix/groups/:group/members/:member/heartbeat", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/panics", func(*gin.Context) { panic("boom") })
	return r
}

func serve(r http.Handler, method, path string) {
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
}

// TestHTTPMetricsLabelByRouteTemplate: requests count under their route
// template, never their path; paths no route has, methods outside the
// standard ones and panics get bounded labels.
func TestHTTPMetricsLabelByRouteTemplate(t *testing.T) {
	m := metrics.New()
	r := engine(m)
	serve(r, http.MethodGet, "/streams/orders")
	serve(r, http.MethodGet, "/streams/payments")
	serve(r, http.MethodGet, "/no/such/path/1")
	serve(r, http.MethodGet, "/no/such/path/2")
	serve(r, "BREW", "/streams/orders")
	serve(r, http.MethodDelete, "/streams/orders") // 405
	serve(r, http.MethodGet, "/panics")
	want := `# HELP rscoord_http_requests_total Requests answered, by route template (gin's, e.g. /coord/v1/streams/:prefix; "unmatched" for 404 and 405 answers to paths no route has), method and status code.
# TYPE rscoord_http_requests_total counter
rscoord_http_requests_total{code="200",method="GET",route="/streams/:prefix"} 2
rscoord_http_requests_total{code="404",method="GET",route="unmatched"} 2
rscoord_http_requests_total{code="405",method="DELETE",route="unmatched"} 1
rscoord_http_requests_total{code="405",method="OTHER",route="unmatched"} 1
rscoord_http_requests_total{code="500",method="GET",route="/panics"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), metrics.HTTPRequestsTotal); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.Registry(), metrics.HTTPRequestDurationSeconds); n != 5 {
		t.Errorf("%d latency series, want 5 (one per route and method)", n)
	}
}

// TestHTTPMetricsCostNoAllocation: once a route's series exist, the
// middleware adds no allocation to a request (the heartbeat path).
func TestHTTPMetricsCostNoAllocation(t *testing.T) {
	path := "/streams/orders/groups/orders/members/a/heartbeat"
	allocs := func(r *gin.Engine) float64 {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, nil)
		r.ServeHTTP(w, req) // the first request makes the series
		return testing.AllocsPerRun(200, func() { r.ServeHTTP(w, req) })
	}
	bare := gin.New()
	bare.POST("/streams/:prefix/groups/:group/members/:member/heartbeat", func(c *gin.Context) { c.Status(http.StatusOK) })
	base, with := allocs(bare), allocs(engine(metrics.New()))
	if with > base {
		t.Errorf("a request allocates %.1f times with the middleware, %.1f without", with, base)
	}
}

// BenchmarkHTTPMiddleware is a heartbeat-shaped request through gin with
// and without the middleware.
func BenchmarkHTTPMiddleware(b *testing.B) {
	bare := gin.New()
	bare.POST("/streams/:prefix/groups/:group/members/:member/heartbeat", func(c *gin.Context) { c.Status(http.StatusOK) })
	for name, r := range map[string]*gin.Engine{"bare": bare, "instrumented": engine(metrics.New())} {
		b.Run(name, func(b *testing.B) {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/streams/orders/groups/orders/members/a/heartbeat", nil)
			b.ReportAllocs()
			for b.Loop() {
				r.ServeHTTP(w, req)
			}
		})
	}
}

// TestGatewayCountsRequests: the gateway installs the middleware, so a
// real server's heartbeats count under the heartbeat route.
func TestGatewayCountsRequests(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	fams := scrapeFamilies(t, s)
	var heartbeats float64
	for _, m := range fams[metrics.HTTPRequestsTotal].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if strings.HasSuffix(labels["route"], "/heartbeat") && labels["method"] == "POST" && labels["code"] == "200" {
			heartbeats += m.GetCounter().GetValue()
		}
		if strings.Contains(labels["route"], "orders") {
			t.Errorf("a route label holds a path: %v", labels)
		}
	}
	if heartbeats != 1 {
		t.Errorf("%v heartbeats counted under the heartbeat route, want 1: %v", heartbeats, fams[metrics.HTTPRequestsTotal])
	}
}
