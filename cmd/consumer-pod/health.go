package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/member/memberprom"
)

// Bounds of the health listener: its answers are small and quick, so a
// client that sends or reads slowly is cut early.
const (
	healthReadTimeout  = 5 * time.Second
	healthWriteTimeout = 10 * time.Second
	healthStopTimeout  = 5 * time.Second
	// probeTimeout bounds --probe: a healthcheck must answer before the
	// orchestrator's own timeout.
	probeTimeout = 3 * time.Second
)

// readyBody is the JSON answer of /readyz: the runtime's Status.
type readyBody struct {
	Ready   bool          `json:"ready"`
	Stream  string        `json:"stream"`
	Group   string        `json:"group"`
	Members []readyMember `json:"members"`
}

type readyMember struct {
	MemberID      string `json:"memberId"`
	State         string `json:"state"`
	Epoch         int64  `json:"epoch"`
	Owned         []int  `json:"owned"`
	LastHeartbeat string `json:"lastHeartbeat,omitempty"`
	Failures      int    `json:"failures"`
	Reason        string `json:"reason,omitempty"`
}

// healthHandler serves a pod's probes and metrics:
//
//   - GET /readyz: 200 while Runtime.Ready (every member joined, lease
//     valid, Redis working), else 503; the body is the members' status.
//   - GET /livez: 200 while the process serves.
//   - GET /metrics: the runtime's metrics (memberprom) and the Go and
//     process collectors.
func healthHandler(rt *member.Runtime) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(memberprom.New(rt), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := rt.Status()
		body := readyBody{Ready: st.Ready, Stream: rt.Stream(), Group: rt.Group(), Members: make([]readyMember, 0, len(st.Members))}
		for _, m := range st.Members {
			rm := readyMember{MemberID: m.MemberID, State: string(m.State), Epoch: m.Epoch, Owned: m.Owned,
				Failures: m.Failures, Reason: m.Reason}
			if rm.Owned == nil {
				rm.Owned = []int{}
			}
			if !m.LastHeartbeat.IsZero() {
				rm.LastHeartbeat = m.LastHeartbeat.UTC().Format(time.RFC3339Nano)
			}
			body.Members = append(body.Members, rm)
		}
		code := http.StatusOK
		if !st.Ready {
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// serveHealth listens on addr and serves healthHandler(rt) until the
// returned stop is called. A listen failure is returned at once, before
// the runtime starts.
func serveHealth(addr string, rt *member.Runtime, log *slog.Logger) (stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-listen: %w", err)
	}
	srv := &http.Server{
		Handler: healthHandler(rt), ReadHeaderTimeout: healthReadTimeout, ReadTimeout: healthReadTimeout,
		WriteTimeout: healthWriteTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("serving /readyz, /livez and /metrics", slog.String("addr", ln.Addr().String()))
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), healthStopTimeout)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			return fmt.Errorf("health listener: %w", err)
		}
		return nil
	}, nil
}

// probe GETs url and reports nil when it answers 200: --probe, a
// healthcheck for images without an HTTP client of their own.
func probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("--probe: %w", err)
	}
	// No keep-alive: one request, and nothing left behind.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("--probe: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("--probe: %s answered %s: %s", url, resp.Status, body)
	}
	return nil
}
