package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

func TestSpringDuration(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"7d", "168h0m0s"}, {"30s", "30s"}, {"500ms", "500ms"}, {"10m", "10m0s"}, {"1500", "1.5s"},
		{"PT168H", "168h0m0s"}, {"P7D", "168h0m0s"}, {"P1DT2H30M", "26h30m0s"}, {"PT0.5S", "500ms"}, {"pt15s", "15s"},
		{"", ""}, {"7 days", ""}, {"P", ""}, {"PT", ""}, {"P1X", ""}, {"-1d", ""},
	} {
		got, err := springDuration(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("springDuration(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("springDuration(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestReferenceAliases(t *testing.T) {
	env := map[string]string{
		"REDIS_STREAM_COORDINATOR_ADMIN_PASSWORD": "ref-pw",
		"COORDINATOR_API_ADMINPASSWORD":           "second-alias-pw",
		"REDIS_STREAM_COORDINATOR_TOKEN_SECRET":   "ref-secret",
		envTokenSecret:                            "our-secret",
		"REDIS_STREAM_COORDINATOR_TOKEN_TTL":      "7d",
		"COORDINATOR_MEMBERLEASETTL":              "soon",
		"COORDINATOR_API_AUTHENTICATEMEMBERAPI":   "FALSE",
		"COORDINATOR_REBALANCETIMEOUT":            "",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got := map[string]aliasUse{}
	for _, u := range referenceAliases(lookup) {
		got[u.alias] = u
	}
	for _, want := range []aliasUse{
		{alias: "REDIS_STREAM_COORDINATOR_ADMIN_PASSWORD", ours: envAdminPassword, value: "ref-pw"},
		{alias: "COORDINATOR_API_ADMINPASSWORD", ours: envAdminPassword, ignored: true},
		{alias: "REDIS_STREAM_COORDINATOR_TOKEN_SECRET", ours: envTokenSecret, ignored: true},
		{alias: "REDIS_STREAM_COORDINATOR_TOKEN_TTL", ours: "RSCOORD_TOKEN_TTL", value: "168h0m0s"},
		{alias: "COORDINATOR_API_AUTHENTICATEMEMBERAPI", ours: "RSCOORD_MEMBER_AUTH", value: "false"},
	} {
		u := got[want.alias]
		if u.ours != want.ours || u.ignored != want.ignored || u.value != want.value || u.err != nil {
			t.Errorf("%s: %+v, want %+v", want.alias, u, want)
		}
	}
	if u := got["COORDINATOR_MEMBERLEASETTL"]; u.err == nil || !strings.Contains(u.err.Error(), "COORDINATOR_MEMBERLEASETTL (alias of RSCOORD_MEMBER_LEASE)") {
		t.Errorf("a bad alias value: %+v", u)
	}
	if _, ok := got["COORDINATOR_REBALANCETIMEOUT"]; ok {
		t.Error("an empty alias counts as unset")
	}
	if v := envOrAlias(lookup, envTokenSecret); v != "our-secret" {
		t.Errorf("token secret %q: ours must win", v)
	}
	if v := envOrAlias(lookup, envAdminPassword); v != "ref-pw" {
		t.Errorf("admin password %q: want the first alias's", v)
	}
	var buf bytes.Buffer
	logReferenceAliases(slog.New(slog.NewTextHandler(&buf, nil)), lookup)
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="environment variable of the reference design used in place of ours" alias=REDIS_STREAM_COORDINATOR_TOKEN_TTL variable=RSCOORD_TOKEN_TTL`,
		`level=WARN msg="environment variable of the reference design ignored: ours is set too and wins" alias=REDIS_STREAM_COORDINATOR_TOKEN_SECRET variable=RSCOORD_TOKEN_SECRET`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ref-pw") || strings.Contains(out, "ref-secret") {
		t.Errorf("a secret was logged:\n%s", out)
	}
}

// The flags of serve take the aliases' values through kong, below the
// command line and our variables, above a --config file.
func TestReferenceAliasesSetServeFlags(t *testing.T) {
	t.Setenv("REDIS_STREAM_COORDINATOR_TOKEN_TTL", "P1D")
	t.Setenv("COORDINATOR_MEMBERLEASETTL", "20000")
	t.Setenv("COORDINATOR_HEARTBEATINTERVAL", "9s")
	t.Setenv("RSCOORD_HEARTBEAT_INTERVAL", "2s")
	t.Setenv("COORDINATOR_DEFAULTS_INITIALSHARDCOUNT", "12")
	t.Setenv("COORDINATOR_API_AUTHENTICATEMEMBERAPI", "false")
	config := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(config, []byte("default-shards: 3\nrebalance-timeout: 40s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cli CLI
	parser, err := newParser(context.Background(), &cli, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse([]string{"serve", "--config", config, "--stale-member-retention", "1m"}); err != nil {
		t.Fatal(err)
	}
	s := cli.Serve
	if s.TokenTTL != 24*time.Hour || s.MemberLease != 20*time.Second || s.HeartbeatInterval != 2*time.Second ||
		s.DefaultShards != 12 || s.RebalanceTimeout != 40*time.Second || s.StaleMemberRetention != time.Minute || s.MemberAuth {
		t.Fatalf("serve flags: token-ttl %v member-lease %v heartbeat-interval %v default-shards %d rebalance-timeout %v stale-member-retention %v member-auth %v",
			s.TokenTTL, s.MemberLease, s.HeartbeatInterval, s.DefaultShards, s.RebalanceTimeout, s.StaleMemberRetention, s.MemberAuth)
	}
	t.Setenv("COORDINATOR_MEMBERLEASETTL", "a while")
	if _, err := parser.Parse([]string{"serve"}); err == nil || !strings.Contains(err.Error(), "COORDINATOR_MEMBERLEASETTL") {
		t.Fatalf("a bad alias value: %v", err)
	}
}

// A real server takes the bootstrap admin's password and the token
// lifetime from the reference design's variables, and says so in its log.
func TestServeTakesReferenceEnvironment(t *testing.T) {
	p := startProcessEnv(t, t.TempDir(), []string{
		"REDIS_STREAM_COORDINATOR_ADMIN_PASSWORD=ref-admin-pw",
		"REDIS_STREAM_COORDINATOR_TOKEN_TTL=PT90S",
	})
	var login protocol.LoginResponse
	coordtest.Remote(t, p.url).As(coordtest.Basic("admin", "ref-admin-pw")).
		JSON(http.MethodPost, protocol.BasePath+"/auth/login", nil, http.StatusOK, &login)
	if login.ExpiresInSeconds < 85 || login.ExpiresInSeconds > 90 {
		t.Fatalf("token lifetime %d s, want 90 s", login.ExpiresInSeconds)
	}
	for _, alias := range []string{"REDIS_STREAM_COORDINATOR_ADMIN_PASSWORD", "REDIS_STREAM_COORDINATOR_TOKEN_TTL"} {
		if !strings.Contains(p.output(), `"alias":"`+alias+`"`) {
			t.Fatalf("no log line names %s:\n%s", alias, p.output())
		}
	}
	if strings.Contains(p.output(), "ref-admin-pw") {
		t.Fatal("the password was logged")
	}
}
