package coordclient

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// An answer's owner hint moves the client's next call to that URL only
// when the client was given it; a URL it was not given, an absent or a
// malformed hint leaves it where it was, and a hinted URL that cannot be
// reached falls back as a connection error does.
func TestOwnerHint(t *testing.T) {
	// Each case gets a stand-by (the client's first URL, whose answers
	// carry the hint), an owner (its second URL), a stranger the client
	// was not given, and a dead address (its third URL, nothing listens).
	type urls struct{ standby, owner, stranger, dead string }
	tests := []struct {
		name string
		hint func(u urls) string
		// wantOwner: the second call reaches the owner, not the stand-by.
		wantOwner bool
	}{
		{"hint in list", func(u urls) string { return u.owner }, true},
		{"hint in list, spelled otherwise", func(u urls) string {
			return strings.Replace(u.owner, "http://", "HTTP://", 1) + "/coord/v1/"
		}, true},
		{"hint not in list", func(u urls) string { return u.stranger }, false},
		{"hint absent", func(urls) string { return "" }, false},
		{"hint malformed", func(urls) string { return "http://%zz" }, false},
		{"hint with user info", func(u urls) string { return strings.Replace(u.owner, "http://", "http://x:y@", 1) }, false},
		{"hint not http", func(u urls) string { return strings.Replace(u.owner, "http://", "ftp://", 1) }, false},
		{"hinted URL down", func(u urls) string { return u.dead }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var standbyHits, ownerHits, strangerHits atomic.Int32
			var u urls
			standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				standbyHits.Add(1)
				if h := tc.hint(u); h != "" {
					w.Header().Set(protocol.OwnerURLHeader, h)
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{}`))
			}))
			defer standby.Close()
			owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ownerHits.Add(1)
				_, _ = w.Write([]byte(`{}`))
			}))
			defer owner.Close()
			stranger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				strangerHits.Add(1)
				_, _ = w.Write([]byte(`{}`))
			}))
			defer stranger.Close()
			u = urls{standby: standby.URL, owner: owner.URL, stranger: stranger.URL, dead: deadURL(t)}

			c, err := New([]string{u.standby, u.owner, u.dead}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			for i := range 2 {
				if _, err := c.Do(context.Background(), http.MethodGet, "/coord/v1/x", nil, nil); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			wantStandby, wantOwnerHits := int32(2), int32(0)
			if tc.wantOwner {
				wantStandby, wantOwnerHits = 1, 1
			}
			if standbyHits.Load() != wantStandby || ownerHits.Load() != wantOwnerHits || strangerHits.Load() != 0 {
				t.Fatalf("stand-by %d, owner %d, stranger %d calls; want %d, %d, 0",
					standbyHits.Load(), ownerHits.Load(), strangerHits.Load(), wantStandby, wantOwnerHits)
			}
		})
	}
}

func TestCanonicalURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:8081", "http://127.0.0.1:8081"},
		{"HTTP://Replica-1:80", "http://replica-1"},
		{"https://r:443/proxy", "https://r/proxy"},
		{"https://r:8443/proxy/", "https://r:8443/proxy"},
		{"http://[::1]:80", "http://[::1]"},
		{"http://[::1]:8081", "http://[::1]:8081"},
	}
	for _, tc := range tests {
		if got := canonicalURL(tc.in); got != tc.want {
			t.Errorf("canonicalURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	c, err := New([]string{"http://a:1", "http://replica-1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := c.hinted("http://Replica-1:80/coord/v1"); !ok || i != 1 {
		t.Fatalf("hinted = %d, %v; want 1, true", i, ok)
	}
}

// deadURL is an http URL of a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}
