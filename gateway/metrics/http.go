package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// Names of the HTTP request metrics.
const (
	// HTTPRequestsTotal counts answered requests by route template,
	// method and status code.
	HTTPRequestsTotal = "rscoord_http_requests_total"
	// HTTPRequestDurationSeconds is the time from a request reaching the
	// router to its answer, by route template and method.
	HTTPRequestDurationSeconds = "rscoord_http_request_duration_seconds"
)

// Bounded label values of the HTTP request metrics.
const (
	// RouteUnmatched is the route label of requests no route matched
	// (404, 405): their paths are the client's, and unbounded.
	RouteUnmatched = "unmatched"
	// MethodOther is the method label of any method but the standard ones.
	MethodOther = "OTHER"
	// CodeOther is the code label of a status outside 100..599.
	CodeOther = "other"
)

// httpMetrics are the request counters and latencies with a cache of the
// label children every (route, method) has used, so that a request looks
// its series up in one map read and never hashes label values.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// series holds a *routeSeries per routeKey.
	series sync.Map
}

type routeKey struct{ route, method string }

// routeSeries are one (route, method)'s children: its latency, and its
// counter by status code, made at the first request answered with it.
type routeSeries struct {
	route, method string
	duration      prometheus.Observer
	codes         [601]atomic.Pointer[prometheus.Counter] // [0]: CodeOther; [100..599]: that status
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	h := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: HTTPRequestsTotal,
			Help: `Requests answered, by route template (gin's, e.g. /coord/v1/streams/:prefix; "unmatched" for 404 and 405 answers to paths no route has), method and status code.`},
			[]string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: HTTPRequestDurationSeconds,
			Help:    "Time from a request reaching the router to its answer, by route template and method; a held heartbeat's includes its wait (see rscoord_heartbeat_duration_seconds).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
			[]string{"route", "method"}),
	}
	reg.MustRegister(h.requests, h.duration)
	return h
}

// HTTPMiddleware returns gin middleware that counts and times every
// request under its route template (c.FullPath()). Install it first, with
// Use before any route is added, so that it sees the status a recovery
// middleware writes after a panic. Its labels are bounded: the router's
// routes, RouteUnmatched, the standard methods and MethodOther, and
// status codes. A request's series are made at the first request of its
// route, method and code and reused after: the steady path is a map read
// and two atomic updates.
func (m *Metrics) HTTPMiddleware() gin.HandlerFunc {
	h, ref := m.http, m.ref
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		took := time.Since(start)
		rs := h.seriesOf(c.FullPath(), c.Request.Method)
		rs.duration.Observe(took.Seconds())
		rs.counter(h, c.Writer.Status()).Inc()
		if ref != nil {
			ref.apiRequest(c, took)
		}
	}
}

func (h *httpMetrics) seriesOf(route, method string) *routeSeries {
	if route == "" {
		route = RouteUnmatched
	}
	method = methodLabel(method)
	k := routeKey{route, method}
	if rs, ok := h.series.Load(k); ok {
		return rs.(*routeSeries)
	}
	rs, _ := h.series.LoadOrStore(k, &routeSeries{route: route, method: method, duration: h.duration.WithLabelValues(route, method)})
	return rs.(*routeSeries)
}

// counter returns the counter of status, made at its first use.
func (rs *routeSeries) counter(h *httpMetrics, status int) prometheus.Counter {
	i, code := 0, CodeOther
	if status >= 100 && status <= 599 {
		i, code = status, ""
	}
	if c := rs.codes[i].Load(); c != nil {
		return *c
	}
	if code == "" {
		code = strconv.Itoa(status)
	}
	c := h.requests.WithLabelValues(rs.route, rs.method, code)
	rs.codes[i].Store(&c)
	return c
}

// methodLabel keeps the standard methods and folds any other into
// MethodOther: a client may send any token as a method.
func methodLabel(method string) string {
	switch method {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return method
	}
	return MethodOther
}
