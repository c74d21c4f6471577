package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// parseServe parses args with rscoord's own parser, without running serve.
func parseServe(t *testing.T, args ...string) (*ServeCmd, error) {
	t.Helper()
	var cli CLI
	parser, err := newParser(context.Background(), &cli, strings.NewReader(""), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return nil, err
	}
	if kctx.Command() != "serve" {
		t.Fatalf("parsed command %q", kctx.Command())
	}
	return &cli.Serve, nil
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rscoord.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFile checks --config: the file sets serve flags of every kind
// (string, duration, list, negatable bool, level, enum); the command line
// and the environment override it; bad files are refused with the key or
// flag named.
func TestConfigFile(t *testing.T) {
	const body = `
listen: 0.0.0.0:9090
member-lease: 20s
heartbeat-interval: 2s
redis: [10.0.0.1:7001, 10.0.0.2:7001]
redis-nat-map: 10.0.0.1:7001=127.0.0.1:17001
auth: false
log-level: debug
log-format: json
default-shards: 8
metrics-public: true
`
	file := writeConfig(t, body)
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		check func(*ServeCmd) bool
	}{
		{"file", nil, nil, func(s *ServeCmd) bool {
			return s.Listen == "0.0.0.0:9090" && s.MemberLease == 20*time.Second && s.HeartbeatInterval == 2*time.Second &&
				slices.Equal(s.Redis, []string{"10.0.0.1:7001", "10.0.0.2:7001"}) && s.RedisNATMap == "10.0.0.1:7001=127.0.0.1:17001" &&
				!s.Auth && s.LogLevel == slog.LevelDebug && s.LogFormat == "json" && s.DefaultShards == 8 && s.MetricsPublic &&
				s.MemberAuth && s.DataDir == "./data" // untouched flags keep their defaults
		}},
		{"flags win", []string{"--member-lease", "30s", "--auth", "--redis", "127.0.0.1:6379"}, nil, func(s *ServeCmd) bool {
			return s.MemberLease == 30*time.Second && s.Auth && slices.Equal(s.Redis, []string{"127.0.0.1:6379"}) && s.Listen == "0.0.0.0:9090"
		}},
		{"environment wins", nil, map[string]string{"RSCOORD_MEMBER_LEASE": "25s", "RSCOORD_LISTEN": "127.0.0.1:1"}, func(s *ServeCmd) bool {
			return s.MemberLease == 25*time.Second && s.Listen == "127.0.0.1:1" && s.HeartbeatInterval == 2*time.Second
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			s, err := parseServe(t, append([]string{"serve", "--config", file}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(s) {
				t.Errorf("parsed %+v", *s)
			}
		})
	}

	for _, bad := range []struct {
		name, body, want string
	}{
		{"unknown key", "listen: 127.0.0.1:1\nmember-leese: 20s\n", `unknown key "member-leese"`},
		{"command-line spelling", "--listen: 127.0.0.1:1\n", `unknown key "--listen"`},
		{"key of another command", "server: http://127.0.0.1:8080\n", `unknown key "server"`},
		{"bare number for a duration", "member-lease: 15\n", "--member-lease"},
		{"bad enum", "log-format: xml\n", "--log-format"},
		{"not a mapping", "- listen\n", "mapping"},
		{"nested", "redis:\n  addr: x\n", `key "redis"`},
		{"no value", "listen:\n", `key "listen" has no value`},
		{"not YAML", "listen: [\n", "config file"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := parseServe(t, "serve", "--config", writeConfig(t, bad.body))
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("config %q: error %v, want one naming %q", bad.body, err, bad.want)
			}
		})
	}
	if _, err := parseServe(t, "serve", "--config", filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing --config file must be an error")
	}
	if s, err := parseServe(t, "serve", "--config", writeConfig(t, "")); err != nil || s.Listen != "127.0.0.1:8080" {
		t.Errorf("an empty config file: %v, listen %q", err, s.Listen)
	}
}

// TestConfigFileTakesEveryServeFlag writes every serve flag with a default
// into a config file (the default as its value) and parses it: no serve
// flag is refused as a key.
func TestConfigFileTakesEveryServeFlag(t *testing.T) {
	var cli CLI
	parser, err := newParser(context.Background(), &cli, strings.NewReader(""), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	checked := 0
	for _, cmd := range parser.Model.Children {
		if cmd.Name != "serve" {
			continue
		}
		for _, f := range cmd.Flags {
			if f.Name == "help" || f.Name == "config" {
				continue
			}
			checked++
			value := f.Default
			if !f.HasDefault {
				value = "x" // strings without default; lists take one item
				if f.IsSlice() {
					value = "[127.0.0.1:1]"
				}
			}
			lines = append(lines, f.Name+": "+quoteYAML(value, f))
		}
	}
	if checked < 40 {
		t.Fatalf("only %d serve flags found", checked)
	}
	if _, err := parseServe(t, "serve", "--config", writeConfig(t, strings.Join(lines, "\n")+"\n")); err != nil {
		t.Fatalf("every serve flag as a key: %v\n%s", err, strings.Join(lines, "\n"))
	}
}

// quoteYAML quotes a scalar so YAML keeps it a string ("" stays empty).
func quoteYAML(v string, f *kong.Flag) string {
	if f.IsSlice() && strings.HasPrefix(v, "[") {
		return v
	}
	return `"` + strings.ReplaceAll(v, `"`, `\"`) + `"`
}

// TestBinaryConfigFile runs the binary with --config: the member lease
// from the file is what members are told.
func TestBinaryConfigFile(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, "member-lease: 9s\nlisten: 127.0.0.1:1\n")
	// startProcess passes --listen 127.0.0.1:0, which wins over the file.
	p := startProcess(t, t.TempDir(), "--config", file)
	defer func() {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("stop: %v\n%s", err, p.output())
		}
	}()
	s := coordtest.Remote(t, p.url)
	s.Authorization = coordtest.Basic("admin", testAdminPassword)
	s.CreateStream("cfg", 2)
	m := coordtest.NewMember("a", "cfg", "cfg")
	resp := m.Beat(s)
	if resp.Status != protocol.StatusOK || resp.MemberLeaseMs != 9000 {
		t.Fatalf("heartbeat answer %+v, want memberLeaseMs 9000 from the config file", resp)
	}
}

// TestConfigFileWritableByOthersIsRefused: a config file its group or
// others may write can turn authentication off, so serve refuses it, and
// the error names the file and its mode.
func TestConfigFileWritableByOthersIsRefused(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o644, true}, {0o666, false}, {0o620, false}} {
		path := writeConfig(t, "listen: 127.0.0.1:9090\n")
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := parseServe(t, "serve", "--config", path)
		if (err == nil) != tc.ok {
			t.Errorf("mode %v: %v, want ok %v", tc.mode, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("mode %v: the error does not name the file: %v", tc.mode, err)
		}
	}
}
