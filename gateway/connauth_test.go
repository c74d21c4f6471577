package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// Credentials that checked out on a connection are recalled for the same
// header only: on one keep-alive connection, a wrong password after a
// good one is refused, and each caller keeps its own roles whatever the
// connection's previous request carried.
func TestConnectionRecallsOnlyTheSameCredentials(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	url, _, _ := serveHTTP(t, s, gateway.HTTPLimits{HTTP2: true})
	read, write := base+"/monitoring/groups", base+"/streams/nope"
	reader := coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader))
	writer := coordtest.Basic(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter))
	// The same length as the reader's good header, one byte apart.
	wrong := coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader)[:len(coordtest.Password(coordtest.UserReader))-1]+"x")
	steps := []struct {
		name, header, path string
		want               int
	}{
		{"reader reads", reader, read, http.StatusOK},
		{"reader again", reader, read, http.StatusOK},
		{"a wrong password of the same length", wrong, read, http.StatusUnauthorized},
		{"no credentials", "", read, http.StatusUnauthorized},
		{"reader may not write", reader, write, http.StatusForbidden},
		{"writer writes", writer, write, http.StatusNotFound},
		{"reader after writer may still not write", reader, write, http.StatusForbidden},
		{"wrong after reader", wrong, read, http.StatusUnauthorized},
		{"reader once more", reader, read, http.StatusOK},
	}
	for _, client := range []struct {
		name string
		c    *http.Client
	}{{"HTTP/1.1", oneConnClient(t)}, {"h2c", h2cClient(t)}} {
		conns := map[string]bool{}
		for _, st := range steps {
			req, err := http.NewRequest(http.MethodGet, url+st.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.path == write {
				req.Method = http.MethodDelete
				req.Body = io.NopCloser(strings.NewReader(`{"requestedBy":"ops","reason":"r"}`))
				req.Header.Set("Content-Type", "application/json")
			}
			if st.header != "" {
				req.Header.Set("Authorization", st.header)
			}
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) { conns[info.Conn.LocalAddr().String()] = true },
			}))
			resp, err := client.c.Do(req)
			if err != nil {
				t.Fatalf("%s, %s: %v", client.name, st.name, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != st.want {
				t.Errorf("%s, %s: %d, want %d", client.name, st.name, resp.StatusCode, st.want)
			}
		}
		if len(conns) != 1 {
			t.Errorf("%s: the requests took %d connections, want one", client.name, len(conns))
		}
	}
}

// oneConnClient speaks HTTP/1.1 over at most one connection at a time.
func oneConnClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
