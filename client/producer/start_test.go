package producer

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveOn serves h on addr until the test ends.
func serveOn(t *testing.T, addr string, h http.HandlerFunc) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
}

// warnCounter is a slog handler that counts WARN records.
type warnCounter struct {
	slog.Handler
	warns  atomic.Int64
	warned chan struct{} // closed at the first WARN
}

func (w *warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && w.warns.Add(1) == 1 {
		close(w.warned)
	}
	return nil
}
func (w *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnCounter) WithGroup(string) slog.Handler            { return w }

func newTestProducer(t *testing.T, addr string, opts ...Opt) *Producer {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: freeAddr(t)}) // never used by Start
	t.Cleanup(func() { rdb.Close() })
	p, err := New(append([]Opt{WithCoordinator("http://" + addr), WithStream("orders"), WithRedis(rdb),
		WithFetchTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func routingHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = jsonEncode(w, protocol.NewProducerRouting("orders", "orders", 2, 1))
}

// TestStartWaitsForTheCoordinator: with WithStartWait(true), Start keeps
// trying while nothing listens at the coordinator's address and succeeds
// once it serves; without it Start fails at once; and the wait ends with
// Start's context.
func TestStartWaitsForTheCoordinator(t *testing.T) {
	addr := freeAddr(t)
	if err := newTestProducer(t, addr).Start(context.Background()); err == nil {
		t.Fatal("Start without a coordinator succeeded")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := newTestProducer(t, addr, WithStartWait(true)).Start(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start waiting past its context = %v, want an error wrapping context.DeadlineExceeded", err)
	}

	log := &warnCounter{warned: make(chan struct{})}
	p := newTestProducer(t, addr, WithStartWait(true), WithLogger(slog.New(log)))
	started := make(chan error, 1)
	go func() { started <- p.Start(context.Background()) }()
	select {
	case <-log.warned: // Start failed once and waits
	case err := <-started:
		t.Fatalf("Start returned %v before the coordinator came up", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Start logged no wait within 5s")
	}
	serveOn(t, addr, routingHandler)
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start once the coordinator serves = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start had not returned 5s after the coordinator came up")
	}
}

// TestStartNamesBothMeaningsOf403: a 403 on a stream may mean credentials
// without the role or a stream that does not exist (a coordinator that
// scopes credentials to streams does not tell): the error names both, still
// matches ErrForbidden, and WithStartWait does not wait on it.
func TestStartNamesBothMeaningsOf403(t *testing.T) {
	addr := freeAddr(t)
	var calls atomic.Int64
	serveOn(t, addr, func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = jsonEncode(w, protocol.NewErrorBody(protocol.CodeForbidden, "forbidden"))
	})
	err := newTestProducer(t, addr, WithStartWait(true)).Start(context.Background())
	if !errors.Is(err, coordclient.ErrForbidden) {
		t.Fatalf("Start = %v, want ErrForbidden", err)
	}
	for _, want := range []string{"may not read", "does not exist", `"orders"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error %q does not say %q", err, want)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d routing requests, want 1 (a 403 is final)", n)
	}
}

func jsonEncode(w http.ResponseWriter, v any) error { return json.NewEncoder(w).Encode(v) }
