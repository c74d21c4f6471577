package replica

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

func TestPeerKeySignsAndChecksClientAddresses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newPeerKey([]byte("a-secret-every-replica-shares-0123456789"))
	other := newPeerKey([]byte("another-secret-of-another-cluster-012345"))
	fwd := forwardedOf(http.Header{forwardedForHeader: {"203.0.113.5, 203.0.113.6"}, realIPHeader: {"203.0.113.9"}})
	signed, ok := k.sign("192.0.2.7:4242", fwd, now)
	if !ok {
		t.Fatal("no signature")
	}
	tampered := strings.Replace(signed, "192.0.2.7", "192.0.2.8", 1)
	tests := []struct {
		name  string
		key   *peerKey
		value string
		fwd   forwardedHeaders
		at    time.Time
		want  string
	}{
		{"signed by a replica", k, signed, fwd, now, "192.0.2.7:4242"},
		{"a little later", k, signed, fwd, now.Add(20 * time.Second), "192.0.2.7:4242"},
		{"the hops spaced otherwise", k, signed, forwardedOf(http.Header{forwardedForHeader: {"203.0.113.5", "203.0.113.6"}, realIPHeader: {"203.0.113.9"}}), now, "192.0.2.7:4242"},
		{"replayed too late", k, signed, fwd, now.Add(31 * time.Second), ""},
		{"from the future", k, signed, fwd, now.Add(-31 * time.Second), ""},
		{"another address under the signature", k, tampered, fwd, now, ""},
		{"another X-Forwarded-For under the signature", k, signed, forwardedHeaders{forwardedFor: "198.51.100.1", realIP: fwd.realIP}, now, ""},
		{"a hop added under the signature", k, signed, forwardedHeaders{forwardedFor: "198.51.100.1," + fwd.forwardedFor, realIP: fwd.realIP}, now, ""},
		{"another X-Real-IP under the signature", k, signed, forwardedHeaders{forwardedFor: fwd.forwardedFor, realIP: "198.51.100.1"}, now, ""},
		{"the forwarding headers dropped", k, signed, forwardedHeaders{}, now, ""},
		{"signed with another secret", other, signed, fwd, now, ""},
		{"no key: never trusted", nil, signed, fwd, now, ""},
		{"not three fields", k, "192.0.2.7:4242", fwd, now, ""},
		{"not a host:port", k, func() string { v, _ := k.sign("192.0.2.7", fwd, now); return v }(), fwd, now, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.key.verify(tc.value, tc.fwd, tc.at)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("verify = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
	if _, ok := (*peerKey)(nil).sign("192.0.2.7:1", forwardedHeaders{}, now); ok {
		t.Fatal("a nil key signed")
	}
	if newPeerKey(nil) != nil {
		t.Fatal("a key without a secret")
	}
}

// Over real HTTP: a replica forwarding a request passes the client's
// address, which the replica answering it trusts only with the shared
// key; a client cannot claim another address by sending the header itself.
func TestForwardedClientAddress(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := assign.Config{HeartbeatInterval: 2 * time.Second, MemberLease: 6 * time.Second, RebalanceTimeout: 20 * time.Second}
	shared := []byte("a-secret-every-replica-shares-0123456789")
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.RemoteAddr)
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			_, _ = io.WriteString(w, " xff="+strings.Join(xff, ","))
		}
		if real := r.Header.Get("X-Real-IP"); real != "" {
			_, _ = io.WriteString(w, " real="+real)
		}
	})
	answering := func(key *peerKey) *httptest.Server {
		f := newFront("owner", log, cfg, time.Second, key)
		f.ServeOwner(echo, prometheus.NewCounter(prometheus.CounterOpts{Name: "forwarded"}))
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		return s
	}
	forwarder := newFront("fwd", log, cfg, time.Second, newPeerKey(shared))
	path := protocol.BasePath + "/monitoring/groups"
	via := func(to *httptest.Server, forwarding ...string) string {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "192.0.2.7:4242"
		req.Header.Set(clientAddressHeader, "198.51.100.1:1 0 forged")
		for i := 0; i+1 < len(forwarding); i += 2 {
			req.Header.Add(forwarding[i], forwarding[i+1])
		}
		w := httptest.NewRecorder()
		forwarder.forward(w, req, to.URL)
		if w.Code != http.StatusOK {
			t.Fatalf("forwarded: %d %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	if got := via(answering(newPeerKey(shared))); got != "192.0.2.7:4242" {
		t.Fatalf("with the shared key the owner saw %q, want the client's address", got)
	}
	if got := via(answering(newPeerKey([]byte("another-secret-of-another-cluster-012345")))); !strings.HasPrefix(got, "127.0.0.1:") {
		t.Fatalf("with another key the owner saw %q, want the forwarding replica's address", got)
	}
	// Behind a proxy: the owner reads the forwarding headers as the
	// forwarding replica received them, beside the signed peer, so that
	// it finds the client as that replica would have (trusting them only
	// from a trusted proxy). Without the key, the forwarding replica is
	// the peer and has appended the address it saw, as any proxy does.
	if got := via(answering(newPeerKey(shared)), "X-Forwarded-For", "203.0.113.5", "X-Forwarded-For", "203.0.113.6", "X-Real-IP", "203.0.113.9"); got != "192.0.2.7:4242 xff=203.0.113.5, 203.0.113.6 real=203.0.113.9" {
		t.Fatalf("with the shared key and forwarding headers the owner saw %q", got)
	}
	if got := via(answering(newPeerKey(shared)), "X-Real-IP", "203.0.113.9"); got != "192.0.2.7:4242 real=203.0.113.9" {
		t.Fatalf("with the shared key and X-Real-IP alone the owner saw %q, want no X-Forwarded-For added", got)
	}
	if got := via(answering(newPeerKey([]byte("another-secret-of-another-cluster-012345"))), "X-Forwarded-For", "203.0.113.5"); !strings.HasPrefix(got, "127.0.0.1:") || !strings.HasSuffix(got, " xff=203.0.113.5, 192.0.2.7") {
		t.Fatalf("with another key and X-Forwarded-For the owner saw %q, want the forwarding replica with the client appended", got)
	}
	// A client sending the header itself.
	direct := answering(newPeerKey(shared))
	req, _ := http.NewRequest(http.MethodGet, direct.URL+path, nil)
	req.Header.Set(clientAddressHeader, "198.51.100.1:1 "+"1800000000 "+strings.Repeat("0", 64))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(raw), "127.0.0.1:") {
		t.Fatalf("a forged header made the owner see %q", raw)
	}
}

// A fan-out's X-Forwarded-For is the client's with the peer appended, as
// a proxy's; the owner that trusts the signed peer drops that hop again,
// for either address family, and leaves a header whose last hop is
// another address alone.
func TestForwardedForHop(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		peer string
		sent string
		seen string // after dropLastHop; "" means no header
	}{
		{nil, "192.0.2.7:4242", "192.0.2.7", ""},
		{[]string{"203.0.113.5"}, "192.0.2.7:4242", "203.0.113.5, 192.0.2.7", "203.0.113.5"},
		{[]string{"203.0.113.5", "203.0.113.6"}, "[2001:db8::1]:80", "203.0.113.5, 203.0.113.6, 2001:db8::1", "203.0.113.5, 203.0.113.6"},
	} {
		in := http.Header{}
		for _, v := range tc.in {
			in.Add(forwardedForHeader, v)
		}
		out := http.Header{}
		appendForwardedFor(out, in, tc.peer)
		if got := out.Get(forwardedForHeader); got != tc.sent {
			t.Errorf("%q from %s: sent %q, want %q", tc.in, tc.peer, got, tc.sent)
		}
		dropLastHop(out, tc.peer)
		if got := out.Get(forwardedForHeader); got != tc.seen {
			t.Errorf("%q from %s: the owner reads %q, want %q", tc.in, tc.peer, got, tc.seen)
		}
	}
	h := http.Header{forwardedForHeader: {"203.0.113.5"}}
	dropLastHop(h, "192.0.2.7:1")
	if got := h.Get(forwardedForHeader); got != "203.0.113.5" {
		t.Errorf("a last hop that is not the peer was dropped: %q", got)
	}
}
