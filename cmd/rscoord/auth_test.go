package main

import (
	"context"
	"encoding/base64"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestCredentialFlags(t *testing.T) {
	group := `{"streamPrefix":"orders","consumerGroup":"orders","state":"EMPTY","groupEpoch":0,"assignmentEpoch":0,
		"metadataVersion":1,"shardCount":4,"activeMigration":null,"targetAssignmentSummary":{},"currentAssignmentSummary":{}}`
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3cret:x"))
	get := func(auth string) *wantRequest {
		return &wantRequest{method: "GET", path: "/coord/v1/streams/orders/groups/orders", authorization: auth}
	}
	runCases(t, []cliCase{
		{name: "basic", args: []string{"group", "get", "orders", "orders", "--user", "ops", "--password", "s3cret:x"},
			want: get(basic), answer: group, wantOut: []string{"orders"}},
		{name: "token", args: []string{"group", "get", "orders", "orders", "--token", "tok.en"},
			want: get("Bearer tok.en"), answer: group},
		{name: "mutations send credentials too",
			args:   []string{"stream", "create", "orders", "--requested-by", "me", "--token", "t"},
			want:   &wantRequest{method: "POST", path: "/coord/v1/streams/orders", body: `{"requestedBy":"me"}`, authorization: "Bearer t"},
			status: 201, answer: `{"streamPrefix":"orders","shardCount":4,"metadataVersion":1}`},
		{name: "token and user", args: []string{"group", "get", "orders", "orders", "--token", "t", "--user", "ops", "--password", "p"},
			wantCode: exitError, wantErr: "--token and --user/--password"},
		{name: "user without password", args: []string{"group", "get", "orders", "orders", "--user", "ops"},
			wantCode: exitError, wantErr: "--user needs --password"},
		{name: "password without user", args: []string{"group", "get", "orders", "orders", "--password", "p"},
			wantCode: exitError, wantErr: "--password needs --user"},
		{name: "401 is shown", args: []string{"group", "get", "orders", "orders", "--token", "old"},
			want: get("Bearer old"), status: 401,
			answer:   `{"status":"UNAUTHORIZED","errorCode":"UNAUTHORIZED","message":"token expired; log in again"}`,
			wantCode: exitError, wantErr: "rscoord: 401 UNAUTHORIZED: token expired; log in again\n"},
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("RSCOORD_USER", "ops")
		t.Setenv("RSCOORD_PASSWORD", "s3cret:x")
		runCases(t, []cliCase{{name: "basic from env", args: []string{"group", "get", "orders", "orders"}, want: get(basic), answer: group}})
		t.Setenv("RSCOORD_USER", "")
		t.Setenv("RSCOORD_PASSWORD", "")
		t.Setenv("RSCOORD_TOKEN", "envtok")
		runCases(t, []cliCase{{name: "token from env", args: []string{"group", "get", "orders", "orders"}, want: get("Bearer envtok"), answer: group}})
	})
}

func TestHashPassword(t *testing.T) {
	// Only the first case hashes at the default cost (10), and checks it;
	// the others test how the password is read, not the cost. Under -race
	// one bcrypt hash or check at cost 10 takes about ten CPU-seconds, so
	// there that case runs the built command (without -race) and checks
	// the cost its hash names: that the hash verifies is proved by the
	// other cases, which differ in the cost only.
	for _, tc := range []struct {
		name, stdin string
		args        []string
		ok          bool
	}{
		{"line", "correct horse\n", nil, true},
		{"no newline", "correct horse", []string{"--cost", "4"}, true},
		{"crlf", "correct horse\r\n", []string{"--cost", "4"}, true},
		{"empty", "", nil, false},
		{"blank line", "\n", nil, false},
		{"too long", strings.Repeat("x", 73), nil, false},
		{"bad cost", "pw", []string{"--cost", "3"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			var code int
			defaultCost := tc.ok && len(tc.args) == 0
			if defaultCost && raceEnabled {
				code = runBuilt(t, append([]string{"hash-password"}, tc.args...), tc.stdin, &stdout, &stderr)
			} else {
				code = runWithInput(context.Background(), append([]string{"hash-password"}, tc.args...), strings.NewReader(tc.stdin), &stdout, &stderr)
			}
			if !tc.ok {
				if code != exitError || !strings.HasPrefix(stderr.String(), "rscoord: hash-password") {
					t.Fatalf("code %d stderr %q", code, stderr.String())
				}
				return
			}
			hash := strings.TrimSpace(stdout.String())
			if code != 0 {
				t.Fatalf("code %d, stderr %q", code, stderr.String())
			}
			if !(defaultCost && raceEnabled) && bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse")) != nil {
				t.Fatalf("%q does not verify; stderr %q", hash, stderr.String())
			}
			wantCost := 10 // hash-password's default
			if len(tc.args) > 0 {
				wantCost = 4
			}
			if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost != wantCost {
				t.Fatalf("%q has cost %d (%v), want %d", hash, cost, err, wantCost)
			}
			if strings.Contains(stdout.String()+stderr.String(), "correct horse") {
				t.Fatal("the password was echoed")
			}
		})
	}
}

// runBuilt runs the rscoord command built without -race with args and
// stdin, and returns its exit code.
func runBuilt(t *testing.T, args []string, stdin string, stdout, stderr *strings.Builder) int {
	t.Helper()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestServeRefusesBadSecurityFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--token-ttl", "0s"},
		{"--admin-rate-limit=-1"},
		{"--admin-rate-limit", "5", "--admin-rate-window", "0s"},
		{"--login-failure-window", "0s"},
		{"--max-held-heartbeats=-1"},
		{"--max-held-heartbeats", "4096"}, // as many as --http-max-connections
		{"--http-max-connections", "100", "--max-held-heartbeats", "150"},
		{"--http2-max-concurrent-streams", "0"},
		{"--http2-max-concurrent-streams", "1001"},
		// Over HTTP/2, 75 connections busy with held answers of 100
		// streams each carry 7,500 at most.
		{"--http2", "--http-max-connections", "100", "--max-held-heartbeats", "7501"},
	} {
		res := runCLI(context.Background(), append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, args...)...)
		if res.code != exitError || !strings.Contains(res.stderr, "serve: --") {
			t.Errorf("%v: code %d stderr %q", args, res.code, res.stderr)
		}
	}
}
