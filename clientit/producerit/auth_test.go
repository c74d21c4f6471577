package producerit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// TestCredentialsReachTheCoordinator runs the producer against a server
// with authentication on: routing needs READ or MEMBER (docs/protocol.md §4).
func TestCredentialsReachTheCoordinator(t *testing.T) {
	rdb := standaloneClient(t)
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	prefix := prefixFor(t)
	s.CreateStream(prefix, 2)
	var login protocol.LoginResponse
	s.JSON(http.MethodPost, protocol.BasePath+"/auth/login",
		protocol.LoginRequest{Username: coordtest.UserReader, Password: coordtest.Password(coordtest.UserReader)},
		http.StatusOK, &login)
	tests := []struct {
		name string
		opt  []producer.Opt
		want int // HTTP status of the refusal; 0 means Start succeeds
	}{
		{"no credentials", nil, http.StatusUnauthorized},
		{"wrong password", []producer.Opt{producer.WithBasicAuth(coordtest.UserMember, "nope")}, http.StatusUnauthorized},
		{"WRITE (includes READ)", []producer.Opt{producer.WithBasicAuth(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter))}, 0},
		{"MEMBER", []producer.Opt{producer.WithBasicAuth(coordtest.UserMember, coordtest.Password(coordtest.UserMember))}, 0},
		{"bearer token of READ", []producer.Opt{producer.WithBearerToken(login.AccessToken)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]producer.Opt{producer.WithCoordinator(s.URL), producer.WithStream(prefix), producer.WithRedis(rdb)}, tc.opt...)
			p, err := producer.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = p.Start(context.Background())
			if tc.want == 0 {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				return
			}
			var cerr *producer.CoordinatorError
			if !errors.As(err, &cerr) || cerr.StatusCode != tc.want {
				t.Fatalf("Start = %v, want a %d from the coordinator", err, tc.want)
			}
		})
	}
	if _, err := producer.New(producer.WithCoordinator(s.URL), producer.WithStream(prefix), producer.WithRedis(rdb),
		producer.WithBasicAuth("a", "b"), producer.WithBearerToken("t")); err == nil {
		t.Fatal("both credential kinds at once must be refused")
	}
}
