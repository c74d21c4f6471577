package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// The proxy of these tests is the loopback address 127.0.0.2; clients
// connect from 127.0.0.1, which is not trusted.
const (
	testProxy   = "127.0.0.2"
	testClient  = "127.0.0.1"
	behindProxy = "203.0.113.7"
)

// fromPeer sends one request from the local address ip, with the
// headers given as name, value pairs, and returns its status and body.
func fromPeer(t *testing.T, url, ip, method, path string, body any, headers ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// Behind a trusted proxy, the members API and the audit log name the
// client its X-Forwarded-For (else X-Real-IP) names; the same headers
// from a peer that is not a trusted proxy are ignored.
func TestTrustedProxyNamesTheClient(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Gateway: gateway.Options{TrustedProxies: []string{testProxy + "/32"}}})
	s.CreateStream("orders", 2)

	address := func(from string, headers ...string) string {
		t.Helper()
		m := coordtest.NewMember("m-"+from, "orders", "orders")
		status, raw := fromPeer(t, s.URL, from, http.MethodPost, coordclient.HeartbeatPath("orders", "orders", m.ID), m.Request(), headers...)
		if status != http.StatusOK {
			t.Fatalf("heartbeat from %s: %d %s", from, status, raw)
		}
		var resp protocol.MembersResponse
		s.JSON(http.MethodGet, coordclient.MonitoringGroupPath("orders", "orders", "members"), nil, http.StatusOK, &resp)
		for _, got := range resp.Members {
			if got.MemberID == m.ID {
				return got.ClientAddress
			}
		}
		t.Fatalf("member %s not listed: %+v", m.ID, resp.Members)
		return ""
	}
	if got := address(testClient, "X-Forwarded-For", behindProxy, "X-Real-IP", behindProxy); got != testClient {
		t.Errorf("forwarding headers from a peer not trusted: clientAddress %q, want the peer %s", got, testClient)
	}
	// A client behind the proxy that sends its own X-Forwarded-For: the
	// proxy appends the address it took the request from, which wins.
	if got := address(testProxy, "X-Forwarded-For", "198.51.100.1, "+behindProxy); got != behindProxy {
		t.Errorf("X-Forwarded-For from the trusted proxy: clientAddress %q, want %s", got, behindProxy)
	}
	if got := address(testProxy, "X-Real-IP", "203.0.113.8"); got != "203.0.113.8" {
		t.Errorf("X-Real-IP from the trusted proxy: clientAddress %q, want 203.0.113.8", got)
	}
	if got := address(testProxy); got != testProxy {
		t.Errorf("the trusted proxy without forwarding headers: clientAddress %q, want its own", got)
	}

	status, raw := fromPeer(t, s.URL, testProxy, http.MethodPost, coordclient.GroupPath("orders", "audited"),
		protocol.OperatorRequest{RequestedBy: "test"}, "X-Forwarded-For", behindProxy)
	if status != http.StatusCreated {
		t.Fatalf("create group through the proxy: %d %s", status, raw)
	}
	var page protocol.AuditPage
	s.JSON(http.MethodGet, coordclient.Path("monitoring", "audit")+"?limit=10", nil, http.StatusOK, &page)
	found := false
	for _, e := range page.Entries {
		if e.ConsumerGroup == "audited" {
			found = true
			if e.ClientAddress != behindProxy {
				t.Errorf("audit entry through the proxy: clientAddress %q, want %s", e.ClientAddress, behindProxy)
			}
		}
	}
	if !found {
		t.Fatalf("no audit entry of the group created: %+v", page.Entries)
	}
}

// Behind a trusted proxy the failed-password limit counts per client the
// proxy names: one client past its limit (429) does not hold up another
// behind the same proxy, nor the proxy's own address. A client that is
// not behind a trusted proxy cannot leave its own limit by naming other
// addresses in X-Forwarded-For.
func TestTrustedProxyClientsHaveTheirOwnLoginLimit(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{
		Auth: &coordtest.Auth{},
		Gateway: gateway.Options{LoginFailureLimit: 100, LoginAddressFailureLimit: 3, LoginFailureWindow: time.Hour,
			TrustedProxies: []string{testProxy}},
	})
	login := func(from, password string, headers ...string) int {
		t.Helper()
		status, _ := fromPeer(t, s.URL, from, http.MethodPost, coordclient.Path("auth", "login"),
			protocol.LoginRequest{Username: coordtest.UserReader, Password: password}, headers...)
		return status
	}
	for i := range 3 {
		if got := login(testProxy, "guess", "X-Forwarded-For", behindProxy); got != http.StatusUnauthorized {
			t.Fatalf("failure %d of the client behind the proxy: %d, want 401", i, got)
		}
	}
	if got := login(testProxy, "guess", "X-Forwarded-For", behindProxy); got != http.StatusTooManyRequests {
		t.Fatalf("the client behind the proxy past its limit: %d, want 429", got)
	}
	if got := login(testProxy, "guess", "X-Forwarded-For", "203.0.113.8"); got != http.StatusUnauthorized {
		t.Errorf("another client behind the same proxy: %d, want 401 (its own limit)", got)
	}
	if got := login(testProxy, "guess"); got != http.StatusUnauthorized {
		t.Errorf("the proxy's own address: %d, want 401 (its own limit)", got)
	}

	// A peer not trusted names a new address in each attempt: all count
	// against its own.
	for i, named := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		if got := login(testClient, "guess", "X-Forwarded-For", named, "X-Real-IP", named); got != http.StatusUnauthorized {
			t.Fatalf("failure %d of the peer not trusted: %d, want 401", i, got)
		}
	}
	if got := login(testClient, "guess", "X-Forwarded-For", "198.51.100.4"); got != http.StatusTooManyRequests {
		t.Errorf("the peer not trusted, naming a fresh address past its limit: %d, want 429", got)
	}
	// The right password still passes, past the limit.
	if got := login(testProxy, coordtest.Password(coordtest.UserReader), "X-Forwarded-For", behindProxy); got != http.StatusOK {
		t.Errorf("the right password of the client past its limit: %d, want 200", got)
	}
}

// CheckTrustedProxies takes addresses and CIDRs of either family and
// refuses anything else, and a /0, which would let any client claim any
// address.
func TestCheckTrustedProxies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		proxies []string
		ok      bool
	}{
		{nil, true},
		{[]string{"10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"}, true},
		{[]string{"10.0.0.0/33"}, false},
		{[]string{"proxy.internal"}, false},
		{[]string{""}, false},
		{[]string{"0.0.0.0/0"}, false},
		{[]string{"::/0"}, false},
	} {
		if err := gateway.CheckTrustedProxies(tc.proxies); (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok %v", tc.proxies, err, tc.ok)
		}
	}
}
