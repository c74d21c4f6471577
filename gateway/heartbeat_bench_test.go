package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// BenchmarkHeartbeatHandler is the server's cost of one steady heartbeat
// (not held) through the whole handler chain, without the network: access
// log, credentials (Basic, as the JVM starter sends on every call, or a
// token, or none with authentication off), decoding, the coordinator's answer, encoding.
func BenchmarkHeartbeatHandler(b *testing.B) {
	for _, creds := range []string{"none", "basic", "bearer"} {
		b.Run(creds, func(b *testing.B) {
			opts := coordtest.Options{Auth: &coordtest.Auth{}}
			if creds == "none" {
				opts.Auth = nil
			}
			s := coordtest.Start(b, "", opts)
			s.CreateStream("orders", 64)
			members := make([]*coordtest.Member, 8)
			for i := range members {
				members[i] = coordtest.NewMember(string(rune('a'+i)), "orders", "orders")
				members[i].Beat(s)
			}
			coordtest.Converge(b, s, 10, members...)
			authorization := coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember))
			switch creds {
			case "none":
				authorization = ""
			case "bearer":
				var login protocol.LoginResponse
				s.JSON(http.MethodPost, coordclient.LoginPath(), protocol.LoginRequest{
					Username: coordtest.UserMember, Password: coordtest.Password(coordtest.UserMember)}, http.StatusOK, &login)
				authorization = "Bearer " + login.AccessToken
			}
			handler := s.Handler()
			b.ReportAllocs()
			cpu := processCPU(b)
			i := 0
			for b.Loop() {
				m := members[i%len(members)]
				i++
				body, err := json.Marshal(m.Request())
				if err != nil {
					b.Fatal(err)
				}
				r := httptest.NewRequest(http.MethodPost, coordclient.HeartbeatPath("orders", "orders", m.ID), bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				if authorization != "" {
					r.Header.Set("Authorization", authorization)
				}
				w := httptest.NewRecorder()
				handler.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("heartbeat: %d %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time this process has used, every goroutine's
// (the coordinator's actors, the garbage collector): what a benchmark
// costs the server, steadier than its wall time on a shared machine.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
