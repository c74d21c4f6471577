package clientit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// serverOnly are module paths (or path prefixes ending in "/") that only
// the server module, its console tests and its tools need. None may reach
// the graph of a program that imports the client module.
var serverOnly = []string{
	"github.com/rscoord/rscoord",  // the server module itself
	"github.com/gin-gonic/",       // HTTP server
	"github.com/cockroachdb/",     // Pebble and what it brings
	"github.com/chromedp/",        // console tests
	"github.com/go-task/",         // the task tool
	"go.etcd.io/etcd/server/",     // never a dependency, checked anyway
	"github.com/alecthomas/kong",  // CLI
	"github.com/aws/",             // the task tool's remote Taskfiles
	"cloud.google.com/go/storage", // likewise
	"github.com/google/go-containerregistry",
	"github.com/prometheus/prometheus", // promtool checks of the dashboards
	"mvdan.cc/sh/",
	"github.com/creack/pty",
}

// TestClientModuleLeavesServerOut builds a throwaway user module that
// imports only the client module (through a replace to ./client, as a user
// with a released version would through the proxy) and checks its
// `go list -m all`: no server-only module, and the etcd client that
// protoactor-go's go.mod names (for its cluster providers, which the member
// never imports) only at protoactor's version, never at the server's. It
// also checks that the client module's go directive is no newer than its
// dependencies need, and logs the module count of both graphs.
func TestClientModuleLeavesServerOut(t *testing.T) {
	t.Parallel() // each builds a binary of its own: the two builds overlap
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build a user module: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(root, "client")

	user := t.TempDir()
	write(t, filepath.Join(user, "go.mod"), `module example.com/user

go 1.26.0

require github.com/rscoord/rscoord/client v0.0.0-00010101000000-000000000000

replace github.com/rscoord/rscoord/client => `+client+"\n")
	write(t, filepath.Join(user, "main.go"), userMain)

	run := func(dir string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		// -mod=mod lets tidy write the user module's go.sum; the
		// repository's own modules are only read (a go.sum missing an entry
		// fails here instead of being rewritten in the tree). GOPROXY and
		// the module cache come from the environment. GOWORK=off: no
		// workspace of the caller's.
		mod := "-mod=readonly"
		if dir == user {
			mod = "-mod=mod"
		}
		cmd.Env = append(os.Environ(), "GOFLAGS="+mod, "GOWORK=off")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
		}
		return out
	}
	run(user, "mod", "tidy")
	userMods := listModules(t, run(user, "list", "-m", "-json", "all"))
	serverMods := listModules(t, run(root, "list", "-m", "-json", "all"))
	run(user, "build", "-o", filepath.Join(user, "consumer"), ".")

	serverEtcd := ""
	for _, m := range serverMods {
		if m.Path == "go.etcd.io/etcd/client/v3" {
			serverEtcd = m.Version
		}
	}
	if serverEtcd == "" {
		t.Fatal("the server module no longer lists go.etcd.io/etcd/client/v3: update this test")
	}
	sawClient, sawActors := false, false
	for _, m := range userMods {
		for _, bad := range serverOnly {
			if m.Path == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(m.Path, bad)) {
				t.Errorf("server-only module %s %s is in a client user's graph", m.Path, m.Version)
			}
		}
		if strings.HasPrefix(m.Path, "go.etcd.io/etcd/") && m.Version == serverEtcd {
			t.Errorf("%s at the server's version %s is in a client user's graph", m.Path, m.Version)
		}
		switch m.Path {
		case "github.com/rscoord/rscoord/client":
			sawClient = true
		case "github.com/asynkron/protoactor-go":
			sawActors = true
		}
	}
	if !sawClient || !sawActors {
		t.Fatalf("the user graph lacks the client module (%v) or protoactor-go (%v): the walk is broken", sawClient, sawActors)
	}
	t.Logf("modules in go list -m all: %d for a client user, %d for the server module", len(userMods), len(serverMods))

	// The go directive: no newer than the newest of the dependencies
	// (the client code uses nothing newer than they require).
	clientMods := listModules(t, run(client, "list", "-m", "-json", "all"))
	var own, need string
	for _, m := range clientMods {
		switch {
		case m.Main:
			own = m.GoVersion
		case need == "" || compareGo(m.GoVersion, need) > 0:
			if m.GoVersion != "" {
				need = m.GoVersion
			}
		}
	}
	if own == "" || need == "" {
		t.Fatalf("go directives not found (client %q, dependencies %q)", own, need)
	}
	if compareGo(own, need) != 0 {
		t.Errorf("client/go.mod says go %s; its dependencies need go %s: say exactly that", own, need)
	}
}

const userMain = `package main

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/producer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	rt, err := member.New(func(ctx context.Context, msg *member.Message) error {
		return msg.Ack(ctx)
	}, member.WithCoordinator("http://127.0.0.1:8080"), member.WithStream("orders"), member.WithRedis(rdb))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := producer.New(producer.WithCoordinator("http://127.0.0.1:8080"), producer.WithStream("orders"), producer.WithRedis(rdb)); err != nil {
		log.Fatal(err)
	}
	if err := rt.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
`

type module struct {
	Path      string
	Version   string
	Main      bool
	GoVersion string
}

// listModules decodes the concatenated JSON objects of go list -m -json.
func listModules(t *testing.T, out []byte) []module {
	t.Helper()
	var mods []module
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m module
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list -m -json: %v", err)
		}
		mods = append(mods, m)
	}
	if len(mods) < 2 {
		t.Fatalf("go list -m all listed %d modules: the listing is broken", len(mods))
	}
	return mods
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compareGo compares go directive versions ("1.21", "1.26.0"): a missing
// patch number counts as 0.
func compareGo(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}
