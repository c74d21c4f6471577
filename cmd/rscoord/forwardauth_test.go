package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/internal/coordtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/proctest"
)

// With authentication on, a replica forwards the caller's credentials:
// no credentials are refused (401 with its challenge), Basic credentials
// and a token issued through one replica work everywhere, and, with the
// users file and token secret shared, the token survives a failover.
func TestClusterForwardsCredentials(t *testing.T) {
	start := authReplicas(t)
	r1 := start("r1")
	r2 := start("r2")
	basic := coordtest.Basic("admin", "admin-pw")

	status, raw := coordtest.Remote(t, r2.url).Do(http.MethodPost, protocol.BasePath+"/streams/orders", protocol.CreateRequest{RequestedBy: "test"})
	if status != http.StatusUnauthorized {
		t.Fatalf("create through the stand-by without credentials: %d %s", status, raw)
	}
	coordtest.Remote(t, r2.url).As(basic).CreateStream("orders", 4)
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	coordtest.Remote(t, r2.url).As(basic).JSON(http.MethodPost, protocol.BasePath+"/auth/login", nil, http.StatusOK, &tok)
	if tok.AccessToken == "" {
		t.Fatal("no token from a login through the stand-by")
	}
	bearer := "Bearer " + tok.AccessToken
	for _, r := range []*replicaProc{r1, r2} {
		var g protocol.GroupResponse
		coordtest.Remote(t, r.url).As(bearer).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &g)
	}

	if err := r1.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r1.proc.Wait(10 * time.Second)
	s2 := coordtest.Remote(t, r2.url).As(bearer)
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, raw := s2.Do(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil)
		if status == http.StatusOK {
			break
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("the token after the failover: %d %s", status, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := r2.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r2.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM of r2: %v\n%s", err, r2.proc.Output())
	}
}

// authReplicas starts, on a fresh real etcd, replicas with authentication
// on that share one users file (admin with password "admin-pw") and one
// token secret, as the cluster mode needs; start waits until the
// replica's coordinator runs.
func authReplicas(t *testing.T) (start func(name string) *replicaProc) {
	t.Helper()
	c := etcdtest.NewCluster(t)
	bin, err := builder.Build(t.Context(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	hash, err := auth.HashPassword("admin-pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	users, _ := json.Marshal(map[string]any{"users": []auth.UserEntry{{Username: "admin", PasswordHash: string(hash), Roles: []string{"ADMIN"}}}})
	usersFile := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(usersFile, users, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(name string) *replicaProc {
		t.Helper()
		addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
		args := []string{"serve", "--listen", addr, "--data-dir", t.TempDir(), "--log-format", "json", "--users", usersFile,
			"--store", "etcd", "--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--advertise-url", "http://" + addr,
			"--replica-id", name}
		p := &replicaProc{proc: proctest.Start(t, name, bin, args, envTokenSecret+"=one-secret-shared-by-every-replica-of-the-cluster"), url: "http://" + addr}
		if _, err := p.proc.WaitForLine(60*time.Second, func(l string) bool {
			return strings.Contains(l, `"rscoord listening"`)
		}); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, p.proc.Output())
		}
		return p
	}
}
