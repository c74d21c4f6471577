package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProbeExitsZeroOnlyOn2xx runs rscoord probe against a server that
// answers with each status in turn, one that never answers, and a port
// that refuses.
func TestProbeExitsZeroOnlyOn2xx(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-hang:
			}
		default:
			http.Error(w, `{"status":"NOT_READY"}`, http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	defer close(hang)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() + "/readyz"
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "200", args: []string{srv.URL + "/ok"}, wantCode: exitOK},
		{name: "204", args: []string{srv.URL + "/empty"}, wantCode: exitOK},
		{name: "503", args: []string{srv.URL + "/readyz"}, wantCode: exitError, wantErr: "503 Service Unavailable"},
		{name: "redirect is not followed", args: []string{srv.URL + "/moved"}, wantCode: exitError, wantErr: "302 Found"},
		{name: "no answer within the timeout", args: []string{srv.URL + "/hang", "--timeout", "200ms"}, wantCode: exitError,
			wantErr: "deadline exceeded"},
		{name: "connection refused", args: []string{refused}, wantCode: exitError, wantErr: "refused"},
		{name: "not a URL", args: []string{"127.0.0.1:8080/readyz"}, wantCode: exitError, wantErr: "not an http or https URL"},
		{name: "no URL", args: nil, wantCode: exitUsage, wantErr: "<url>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(context.Background(), append([]string{"probe"}, tt.args...)...)
			errOK := strings.Contains(res.stderr, tt.wantErr) && (tt.wantErr != "" || res.stderr == "")
			if res.code != tt.wantCode || res.stdout != "" || !errOK {
				t.Errorf("probe %v: %+v, want code %d and stderr containing %q", tt.args, res, tt.wantCode, tt.wantErr)
			}
		})
	}
}
