package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/bcrypt"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
)

func TestVersionFlagAndBareHelp(t *testing.T) {
	res := runCLI(context.Background(), "--version")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "rscoord ") {
		t.Errorf("--version: %+v", res)
	}
	res = runCLI(context.Background())
	if res.code != exitUsage || res.stdout != "" || !strings.Contains(res.stderr, "Usage: rscoord") || !strings.Contains(res.stderr, "stream list") {
		t.Errorf("bare rscoord: %+v", res)
	}
}

// TestServerHostPort checks that --server host:port means http://host:port.
func TestServerHostPort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"groups":[]}`)
	}))
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	res := runCLI(context.Background(), "group", "list", "--server", hostPort)
	if res.code != 0 || !strings.Contains(res.stdout, "No consumer groups.") {
		t.Fatalf("--server %s: %+v", hostPort, res)
	}
}

// TestJSONErrors checks that --json prints failures as one JSON object:
// the server's error body with its status, or CLI_ERROR.
func TestJSONErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"status":"CONFLICT","errorCode":"GROUP_ALREADY_EXISTS","message":"exists"}`)
	}))
	defer srv.Close()
	tests := []struct {
		args []string
		want jsonError
	}{
		{[]string{"group", "create", "orders", "billing", "--server", srv.URL, "--json"},
			jsonError{HTTPStatus: 409, Status: "CONFLICT", ErrorCode: "GROUP_ALREADY_EXISTS", Message: "exists"}},
		{[]string{"group", "create", "orders", "{x}", "--server", srv.URL, "--json"},
			jsonError{ErrorCode: "CLI_ERROR"}},
	}
	for _, tc := range tests {
		res := runCLI(context.Background(), tc.args...)
		var got jsonError
		if err := json.Unmarshal([]byte(res.stderr), &got); err != nil || res.code != exitError {
			t.Fatalf("%v: code %d stderr %q is not one JSON error: %v", tc.args, res.code, res.stderr, err)
		}
		if tc.want.Message == "" {
			tc.want.Message = got.Message
		}
		if got != tc.want || got.Message == "" {
			t.Errorf("%v: got %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

// TestBashCompletion sources the generated script in bash and completes.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is not installed")
	}
	res := runCLI(context.Background(), "completion", "bash")
	if res.code != 0 {
		t.Fatalf("completion bash: %+v", res)
	}
	script := filepath.Join(t.TempDir(), "rscoord.bash")
	if err := os.WriteFile(script, []byte(res.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		words string
		want  []string
		not   []string
	}{
		{"rscoord st", []string{"stream"}, []string{"serve"}},
		{"rscoord stream ", []string{"list", "create", "scale"}, []string{"serve"}},
		{"rscoord group l", []string{"list"}, nil},
		{"rscoord group list --js", []string{"--json"}, nil},
		{"rscoord --server x:1 shards --ser", []string{"--server"}, nil},
		{"rscoord serve --no-me", []string{"--no-member-auth"}, nil},
	}
	for _, tc := range tests {
		words := strings.Fields(tc.words)
		if strings.HasSuffix(tc.words, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		cmd := exec.Command(bash, "--norc", "-c", `source "$1"; COMP_WORDS=(`+strings.Join(quoted, " ")+`); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _rscoord; echo "${COMPREPLY[*]}"`, "bash", script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.words, err, out)
		}
		got := strings.Fields(string(out))
		for _, w := range tc.want {
			if !contains(got, w) {
				t.Errorf("%q completes to %v, want %q among them", tc.words, got, w)
			}
		}
		for _, w := range tc.not {
			if contains(got, w) {
				t.Errorf("%q completes to %v, want no %q", tc.words, got, w)
			}
		}
	}
}

// TestZshAndFishCompletion checks the other scripts' shape, then runs each
// through its shell's syntax check. In CI a missing shell is a failure;
// on a developer's machine without it that check is skipped.
func TestZshAndFishCompletion(t *testing.T) {
	for shell, want := range map[string][]string{
		"zsh":  {"#compdef rscoord", "bashcompinit", "complete -F _rscoord rscoord", `"stream") echo "autoscale complete create delete list`},
		"fish": {`complete -c rscoord -n 'test (__rscoord_path) = \'\'' -a`, "-l json", "case 'stream'"},
	} {
		t.Run(shell, func(t *testing.T) {
			res := runCLI(context.Background(), "completion", shell)
			if res.code != 0 {
				t.Fatalf("completion %s: %+v", shell, res)
			}
			for _, w := range want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("completion %s lacks %q", shell, w)
				}
			}
			bin, err := exec.LookPath(shell)
			if err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s is not installed; .ci/run installs the Debian %s package", shell, shell)
				}
				t.Skipf("%s is not installed (apt-get install %s): its syntax check is left to CI", shell, shell)
			}
			script := filepath.Join(t.TempDir(), "rscoord."+shell)
			if err := os.WriteFile(script, []byte(res.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-n", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestFirstHourAgainstServer runs the newer commands against the built
// server with Redis: login saves a 0600 token that later commands use,
// stream list shows a created stream, group create and list, shards,
// offsets, messages and the audit log.
func TestFirstHourAgainstServer(t *testing.T) {
	rdb := redistest.Standalone(t)
	p := startProcess(t, t.TempDir(), "--redis", rdb.Addr)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	ctx := context.Background()
	server := strings.TrimPrefix(p.url, "http://") // host:port works too

	res := runCLIInput(ctx, testAdminPassword+"\n", "login", "--server", server, "--user", "admin")
	if res.code != 0 || !strings.Contains(res.stdout, "Logged in") {
		t.Fatalf("login: %+v", res)
	}
	dir, _ := os.UserConfigDir()
	fi, err := os.Stat(filepath.Join(dir, "rscoord", "tokens.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved token: %v, mode %v; want mode 0600", err, fi)
	}

	steps := []struct {
		args []string
		want []string
	}{
		{[]string{"stream", "create", "orders", "--shards", "2", "--reason", "test"}, []string{"orders"}},
		{[]string{"stream", "list"}, []string{"STREAM", "orders", "2"}},
		{[]string{"group", "create", "orders", "billing", "--reason", "test"}, []string{"billing"}},
		{[]string{"group", "list", "orders"}, []string{"billing", "orders"}},
		{[]string{"shards", "orders", "orders"}, []string{"orders:0", "orders:1"}},
		{[]string{"offsets", "orders", "billing"}, []string{"orders:0", "orders:1"}},
		{[]string{"audit", "--limit", "1"}, []string{"CREATE_GROUP", "orders/billing", "Next page: --before"}},
	}
	for _, s := range steps {
		res := runCLI(ctx, append(s.args, "--server", server)...)
		if res.code != 0 {
			t.Fatalf("%v: %+v", s.args, res)
		}
		for _, w := range s.want {
			if !strings.Contains(res.stdout, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", s.args, w, res.stdout)
			}
		}
	}
	// Audit paging: the cursor of page one leads to the older entry.
	var page protocol.AuditPage
	res = runCLI(ctx, "audit", "--limit", "1", "--json", "--server", server)
	if err := json.Unmarshal([]byte(res.stdout), &page); err != nil || page.Next == nil {
		t.Fatalf("audit --json: %v %+v", err, res)
	}
	res = runCLI(ctx, "audit", "--limit", "1", "--before", *page.Next, "--server", server)
	if res.code != 0 || !strings.Contains(res.stdout, "CREATE_STREAM") {
		t.Fatalf("audit second page: %+v", res)
	}

	// Messages: write three entries to shard 0 and page through them.
	for range 3 {
		if err := rdb.Client().XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"k", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	res = runCLI(ctx, "messages", "orders", "orders", "0", "--limit", "2", "--server", server)
	if res.code != 0 || strings.Count(res.stdout, "k=v") != 2 || !strings.Contains(res.stdout, "Next page: --cursor") {
		t.Fatalf("messages page 1: %+v", res)
	}

	res = runCLI(ctx, "logout", "--server", server)
	if res.code != 0 {
		t.Fatalf("logout: %+v", res)
	}
	res = runCLI(ctx, "stream", "list", "--server", server)
	if res.code != exitError || !strings.Contains(res.stderr, "401") {
		t.Fatalf("after logout: %+v", res)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// runCLIInput is runCLI with stdin.
func runCLIInput(ctx context.Context, stdin string, args ...string) cliResult {
	var stdout, stderr strings.Builder
	code := runWithInput(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// TestHashPasswordOnTerminal runs the binary on a pseudo-terminal: it
// prompts on stderr, reads the password twice without echo and prints the
// hash.
func TestHashPasswordOnTerminal(t *testing.T) {
	t.Parallel()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var stdout strings.Builder
	cmd := exec.Command(bin, "hash-password", "--cost", "4")
	cmd.Stdin, cmd.Stderr, cmd.Stdout = tty, tty, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	// Everything the terminal shows, as a person would see it.
	var mu sync.Mutex
	var screen strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1024)
		for {
			n, err := ptmx.Read(buf) // EIO once the child exits
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	shown := func() string {
		mu.Lock()
		defer mu.Unlock()
		return screen.String()
	}
	for _, prompt := range []string{"Password: ", "Again: "} {
		deadline := time.Now().Add(30 * time.Second)
		if !poll.Soon(time.Until(deadline), func() bool { return strings.Contains(shown(), prompt) }) {
			t.Fatalf("no prompt %q; the terminal shows %q", prompt, shown())
		}
		// As a person would: after the prompt, once the terminal stopped
		// echoing (a loaded machine showed the password typed in between).
		if !poll.Wait(time.Until(deadline), time.Millisecond, func() bool { return echoOff(ptmx) }) {
			t.Fatalf("the terminal still echoes after the prompt %q", prompt)
		}
		if _, err := io.WriteString(ptmx, "correct horse\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hash-password: %v", err)
	}
	if hash := strings.TrimSpace(stdout.String()); bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse")) != nil {
		t.Fatalf("%q does not verify", hash)
	}
	ptmx.Close()
	<-done
	if strings.Contains(shown(), "correct horse") {
		t.Fatalf("the password was echoed: %q", shown())
	}
}
