package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/proctest"
)

// process is a running coordinator binary.
type process struct {
	t    *testing.T
	proc *proctest.Process
	url  string
}

// output is everything the process printed so far.
func (p *process) output() string { return p.proc.Output() }

// testAdminPassword is the admin password of processes started by
// startProcess.
const testAdminPassword = "test-admin-pw"

// startProcess runs `rscoord serve` on dataDir at a free port, with
// RSCOORD_ADMIN_PASSWORD set to testAdminPassword, and waits until it
// listens.
func startProcess(t *testing.T, dataDir string, extra ...string) *process {
	t.Helper()
	return startProcessEnv(t, dataDir, []string{envAdminPassword + "=" + testAdminPassword}, extra...)
}

// startProcessEnv is startProcess with env added to the environment; the
// secrets the test's own environment may hold are blanked first (the
// server treats an empty variable as unset).
func startProcessEnv(t *testing.T, dataDir string, env []string, extra ...string) *process {
	t.Helper()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"}, extra...)
	env = append([]string{envAdminPassword + "=", envTokenSecret + "="}, env...)
	p := &process{t: t, proc: proctest.Start(t, "rscoord", bin, args, env...)}
	var rec struct {
		Address string `json:"address"`
	}
	_, err = p.proc.WaitForLine(30*time.Second, func(line string) bool {
		return strings.Contains(line, `"rscoord listening"`) && json.Unmarshal([]byte(line), &rec) == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + rec.Address
	return p
}

// stop sends sig and waits for the process to exit, returning its error.
func (p *process) stop(sig syscall.Signal) error {
	p.t.Helper()
	if err := p.proc.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	return p.proc.Wait(20 * time.Second)
}

func TestBinaryRestartKeepsState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			data := filepath.Join(dir, sig.String())
			p := startProcess(t, data)
			s := coordtest.Remote(t, p.url)
			s.Authorization = coordtest.Basic("admin", testAdminPassword)
			s.CreateStream("orders", 4)
			a := coordtest.NewMember("a", "orders", "orders")
			b := coordtest.NewMember("b", "orders", "orders")
			a.Beat(s)
			b.Beat(s)
			coordtest.Converge(t, s, 6, a, b)
			var before protocol.GroupResponse
			s.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &before)
			ownedA, ownedB := slices.Clone(a.Owned), slices.Clone(b.Owned)

			err := p.stop(sig)
			if sig == syscall.SIGTERM {
				if err != nil {
					t.Fatalf("SIGTERM exit: %v; stderr:\n%s", err, p.output())
				}
				if !strings.Contains(p.output(), "rscoord stopped cleanly") {
					t.Fatalf("no clean stop logged; stderr:\n%s", p.output())
				}
			}

			p = startProcess(t, data)
			s = coordtest.Remote(t, p.url)
			s.Authorization = coordtest.Basic("admin", testAdminPassword)
			var after protocol.GroupResponse
			s.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &after)
			if after.GroupEpoch != before.GroupEpoch || after.MetadataVersion != before.MetadataVersion ||
				after.AssignmentEpoch != before.AssignmentEpoch {
				t.Fatalf("restart after %v changed the group:\n before %+v\n after  %+v", sig, before, after)
			}
			for _, m := range []*coordtest.Member{a, b} {
				if resp := m.Beat(s); resp.Status != protocol.StatusOK {
					t.Fatalf("%s after restart: %+v", m.ID, resp)
				}
			}
			if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
				t.Fatalf("ownership moved: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
			}
			if err := p.stop(syscall.SIGTERM); err != nil {
				t.Fatalf("second SIGTERM exit: %v", err)
			}
		})
	}
}

func TestServeFlagsFromEnvironment(t *testing.T) {
	t.Parallel()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "RSCOORD_DATA_DIR="+t.TempDir(), "RSCOORD_MEMBER_LEASE=1s", "RSCOORD_HEARTBEAT_INTERVAL=2s")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--member-lease 1s must be longer than --heartbeat-interval 2s") {
		t.Fatalf("a lease shorter than the interval from the environment must be refused; got err=%v:\n%s", err, out)
	}
}

// TestServeFlagBounds checks that serve refuses a zero or negative timing
// or size flag, naming it, instead of serving with the library's default
// (which reads zero as "unset"), and accepts the edges that are valid.
func TestServeFlagBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" means accepted
	}{
		{"defaults", nil, ""},
		{"zero lease", []string{"--member-lease", "0s"}, "--member-lease 0s must be positive"},
		{"negative lease", []string{"--member-lease=-1s"}, "--member-lease -1s must be positive"},
		{"zero interval", []string{"--heartbeat-interval", "0s"}, "--heartbeat-interval 0s must be positive"},
		{"interval below the reconcile interval", []string{"--heartbeat-interval", "100ms"}, "--heartbeat-interval 100ms must be at least 200ms"},
		{"interval at the reconcile interval", []string{"--heartbeat-interval", "200ms", "--member-lease", "1s"}, ""},
		{"lease not longer than the interval", []string{"--heartbeat-interval", "5s", "--member-lease", "5s"}, "--member-lease 5s must be longer than --heartbeat-interval 5s"},
		{"zero rebalance timeout", []string{"--rebalance-timeout", "0s"}, "--rebalance-timeout 0s must be positive"},
		{"zero retention", []string{"--stale-member-retention", "0s"}, "--stale-member-retention 0s must be positive"},
		{"negative retention", []string{"--stale-member-retention=-5m"}, "--stale-member-retention -5m0s must be positive"},
		{"zero shutdown timeout", []string{"--shutdown-timeout", "0s"}, "--shutdown-timeout 0s must be positive"},
		{"zero default shards", []string{"--default-shards", "0"}, "--default-shards 0 must be between 1 and 100000"},
		{"too many default shards", []string{"--default-shards", "100001"}, "--default-shards 100001 must be between 1 and 100000"},
		{"one default shard", []string{"--default-shards", "1"}, ""},
		{"zero correction step", []string{"--max-correction-step", "0"}, "--max-correction-step 0 must be at least 1"},
		{"negative correction step", []string{"--max-correction-step=-3"}, "--max-correction-step -3 must be at least 1"},
		{"zero token TTL, as before", []string{"--token-ttl", "0s"}, "--token-ttl 0s must be positive"},
		{"trusted proxies", []string{"--trusted-proxies", "10.0.0.0/8, 192.168.0.7,fd00::/8"}, ""},
		{"trusted proxy not a CIDR", []string{"--trusted-proxies", "10.0.0.0/33"}, `--trusted-proxies: "10.0.0.0/33" is not a CIDR`},
		{"trusting every address", []string{"--trusted-proxies", "0.0.0.0/0"}, `--trusted-proxies: "0.0.0.0/0" trusts every address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseServe(t, append([]string{"serve"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			err = s.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v refused: %v", tc.args, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestBinaryRefusesZeroFlags runs the binary with zero timing flags: it
// exits 1 before serving, every flag named, none replaced by its default.
func TestBinaryRefusesZeroFlags(t *testing.T) {
	t.Parallel()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--member-lease", "0s", "--default-shards", "0", "--shutdown-timeout", "0s")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitError {
		t.Fatalf("exit %v, want code %d:\n%s", err, exitError, out)
	}
	for _, want := range []string{"--member-lease 0s must be positive", "--default-shards 0 must be between", "--shutdown-timeout 0s must be positive"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "rscoord listening") {
		t.Errorf("served with a refused flag:\n%s", out)
	}
}

// TestBinaryBusyAddressKeepsTheFirstStart: a first start whose address is
// taken fails before it generates the admin password, so the start after
// it, on a free address, is the first start and prints the password.
func TestBinaryBusyAddressKeepsTheFirstStart(t *testing.T) {
	t.Parallel()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	data := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", busy.Addr().String(), "--data-dir", data)
	cmd.Env = append(os.Environ(), envAdminPassword+"=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitError || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("exit %v, want code %d naming the address in use:\n%s", err, exitError, out)
	}
	if strings.Contains(string(out), "generated the password") {
		t.Fatalf("a start that could not listen generated the admin password:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(data, "rscoord-admin-password")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a start that could not listen wrote an admin password: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "rscoord-admin-password-hash")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a start that could not listen saved an admin password: %v", err)
	}
	p := startProcessEnv(t, data, nil)
	if !strings.Contains(p.output(), "generated the password of the bootstrap admin") {
		t.Fatalf("the next start did not say it generated a password; stderr:\n%s", p.output())
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryBootstrapAdmin starts a server without RSCOORD_ADMIN_PASSWORD:
// it generates a password into a 0600 file its log names (never the
// password itself), which works, keeps the hash, and generates nothing on
// the next start. RSCOORD_ADMIN_PASSWORD then wins, and its tokens outlive
// a restart until the password changes.
func TestBinaryBootstrapAdmin(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p := startProcessEnv(t, data, nil)
	file := filepath.Join(data, "rscoord-admin-password")
	if !strings.Contains(p.output(), "generated the password of the bootstrap admin") || !strings.Contains(p.output(), file) {
		t.Fatalf("the log does not name the generated password's file %s; stderr:\n%s", file, p.output())
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	password := strings.TrimSpace(string(raw))
	if len(password) < 12 {
		t.Fatalf("generated password %q", password)
	}
	if strings.Contains(p.output(), password) {
		t.Fatalf("the password is in the log; stderr:\n%s", p.output())
	}
	checkJSONLog(t, p.output())
	s := coordtest.Remote(t, p.url)
	var login protocol.LoginResponse
	s.JSON(http.MethodPost, protocol.BasePath+"/auth/login", protocol.LoginRequest{Username: "admin", Password: password}, http.StatusOK, &login)
	s.Authorization = "Bearer " + login.AccessToken
	s.CreateStream("orders", 2)
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/session", nil, http.StatusOK, nil)
	s.Authorization = coordtest.Basic("admin", "wrong")
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/session", nil, http.StatusUnauthorized, nil)
	s.Authorization = ""
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/session", nil, http.StatusUnauthorized, nil)
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rscoord-admin-password-hash", "rscoord-token-secret", "rscoord-admin-password"} {
		raw, err := os.ReadFile(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		if name != "rscoord-admin-password" && strings.Contains(string(raw), password) {
			t.Fatalf("%s holds the password", name)
		}
		if fi, _ := os.Stat(filepath.Join(data, name)); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v", name, fi.Mode())
		}
	}
	if raw, _ := os.ReadFile(filepath.Join(data, "rscoord-admin-password-hash")); !strings.HasPrefix(string(raw), "$2a$") {
		t.Fatalf("the admin file is not a bcrypt hash: %q", raw)
	}

	// Second start: nothing printed; the password and the token still work.
	p = startProcessEnv(t, data, nil)
	if strings.Contains(p.output(), "generated") {
		t.Fatalf("a password was generated again; stderr:\n%s", p.output())
	}
	s = coordtest.Remote(t, p.url)
	s.Authorization = coordtest.Basic("admin", password)
	s.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, nil)
	s.Authorization = "Bearer " + login.AccessToken
	s.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, nil)
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// RSCOORD_ADMIN_PASSWORD wins over the stored hash.
	p = startProcessEnv(t, data, []string{envAdminPassword + "=chosen-from-env"})
	s = coordtest.Remote(t, p.url)
	s.Authorization = coordtest.Basic("admin", "chosen-from-env")
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/session", nil, http.StatusOK, nil)
	s.Authorization = coordtest.Basic("admin", password)
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/session", nil, http.StatusUnauthorized, nil)
	s.Authorization = ""
	var envLogin protocol.LoginResponse
	s.JSON(http.MethodPost, protocol.BasePath+"/auth/login", protocol.LoginRequest{Username: "admin", Password: "chosen-from-env"}, http.StatusOK, &envLogin)
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// A restart with the same RSCOORD_ADMIN_PASSWORD keeps its tokens; a
	// changed one revokes them.
	p = startProcessEnv(t, data, []string{envAdminPassword + "=chosen-from-env"})
	s = coordtest.Remote(t, p.url)
	s.Authorization = "Bearer " + envLogin.AccessToken
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/session", nil, http.StatusOK, nil)
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p = startProcessEnv(t, data, []string{envAdminPassword + "=changed-from-env"})
	s = coordtest.Remote(t, p.url)
	s.Authorization = "Bearer " + envLogin.AccessToken
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/session", nil, http.StatusUnauthorized, nil)
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryNoAuth checks --no-auth: anonymous ADMIN, with a warning.
func TestBinaryNoAuth(t *testing.T) {
	t.Parallel()
	p := startProcess(t, t.TempDir(), "--no-auth")
	if !strings.Contains(p.output(), "authentication is OFF") {
		t.Fatalf("no warning; stderr:\n%s", p.output())
	}
	s := coordtest.Remote(t, p.url)
	s.CreateStream("orders", 2)
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestCLIAgainstServer runs admin commands against a real server with
// each kind of credentials.
func TestCLIAgainstServer(t *testing.T) {
	p := startProcess(t, t.TempDir())
	s := coordtest.Remote(t, p.url)
	var login protocol.LoginResponse
	s.JSON(http.MethodPost, protocol.BasePath+"/auth/login", protocol.LoginRequest{Username: "admin", Password: testAdminPassword}, http.StatusOK, &login)
	ctx := context.Background()
	res := runCLI(ctx, "stream", "create", "orders", "--shards", "2", "--server", p.url, "--user", "admin", "--password", testAdminPassword)
	if res.code != 0 {
		t.Fatalf("create with --user/--password: %+v", res)
	}
	res = runCLI(ctx, "group", "get", "orders", "orders", "--server", p.url, "--token", login.AccessToken)
	if res.code != 0 || !strings.Contains(res.stdout, "orders") {
		t.Fatalf("get with --token: %+v", res)
	}
	res = runCLI(ctx, "group", "get", "orders", "orders", "--server", p.url)
	if res.code != exitError || !strings.Contains(res.stderr, "401 UNAUTHORIZED") {
		t.Fatalf("get without credentials: %+v", res)
	}
	t.Setenv("RSCOORD_USER", "admin")
	t.Setenv("RSCOORD_PASSWORD", testAdminPassword)
	res = runCLI(ctx, "stream", "status", "orders", "--server", p.url)
	if res.code != 0 {
		t.Fatalf("status with credentials from the environment: %+v", res)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// checkJSONLog checks a --log-format json log: every line is a JSON
// object, and durations are strings ("15s"), never integer nanoseconds.
func checkJSONLog(t *testing.T, log string) {
	t.Helper()
	durations := 0
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("a log line is not JSON (%v): %q", err, line)
		}
		if d, ok := entry["tokenTTL"]; ok {
			durations++
			if _, isString := d.(string); !isString {
				t.Errorf("tokenTTL is logged as %v (%T), want a duration string", d, d)
			}
		}
	}
	if durations == 0 {
		t.Fatalf("no line logged tokenTTL, so durations were not checked:\n%s", log)
	}
}
