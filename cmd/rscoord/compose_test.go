package main

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/internal/image"
)

// composeService is what the test reads of a compose.yaml service.
type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context string `yaml:"context"`
		Target  string `yaml:"target"`
	} `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	ReadOnly    bool     `yaml:"read_only"`
	CapDrop     []string `yaml:"cap_drop"`
	SecurityOpt []string `yaml:"security_opt"`
	// DependsOn must be compose's long form: a condition for every
	// dependency (the short list means only "started").
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// Images compose.yaml runs from this repository.
const (
	composeCoordinatorImage = "rscoord:latest"
	composePodsImage        = "rscoord-pods:latest"
)

// secretEnv are the variables serve reads that are not flags.
var secretEnv = []string{envTokenSecret, envPreviousTokenSecrets, envAdminPassword, envRedisPassword}

// TestComposeMatchesCode keeps compose.yaml true to the code it runs: its
// images are the Dockerfile's targets (the coordinator's also the name
// go tool task image gives), each command line and environment variable
// is one the binaries take, the coordinator's config file parses with
// serve's own parser, ports and the data directory agree with the image,
// and every file mounted from the repository exists.
func TestComposeMatchesCode(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	read := func(name string) string {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read("compose.yaml")), &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	dockerfile := read("Dockerfile")
	stages := regexp.MustCompile(`(?m)^FROM \S+ AS (\S+)$`).FindAllStringSubmatch(dockerfile, -1)
	var targets []string
	for _, m := range stages {
		targets = append(targets, m[1])
	}
	if len(targets) == 0 || targets[len(targets)-1] != "rscoord" {
		t.Fatalf("Dockerfile stages %v: the last (docker build's default) must be rscoord", targets)
	}
	ref := regexp.MustCompile(`Ref\s+string\s+` + "`" + `default:"([^"]+)"`).FindStringSubmatch(read("cmd/rscoord-image/main.go"))
	if ref == nil || ref[1] != composeCoordinatorImage {
		t.Fatalf("go tool task image names its image %v, compose.yaml runs %s", ref, composeCoordinatorImage)
	}

	kinds := map[string]int{}
	for name, svc := range compose.Services {
		if svc.Build != nil {
			if svc.Build.Context != "." || !slices.Contains(targets, svc.Build.Target) {
				t.Errorf("%s: builds %+v; want context . and a Dockerfile target of %v", name, *svc.Build, targets)
			}
			want := map[string]string{"rscoord": composeCoordinatorImage, "pods": composePodsImage}[svc.Build.Target]
			if svc.Image != want {
				t.Errorf("%s: target %s tagged %s, want %s", name, svc.Build.Target, svc.Image, want)
			}
		}
		for _, v := range svc.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(host, "./") {
				if _, err := os.Stat(filepath.Join(root, host)); err != nil {
					t.Errorf("%s mounts %s: %v", name, host, err)
				}
			}
		}
		switch svc.Image {
		case composeCoordinatorImage:
			kinds["rscoord"]++
			checkComposeCoordinator(t, root, name, svc)
		case composePodsImage:
			if len(svc.Entrypoint) != 1 || !strings.Contains(dockerfile, "COPY --from=build /out"+svc.Entrypoint[0]+" "+svc.Entrypoint[0]+"\n") {
				t.Errorf("%s: entrypoint %v is not a binary of the Dockerfile's pods stage", name, svc.Entrypoint)
				continue
			}
			kinds[svc.Entrypoint[0]]++
			checkComposePod(t, name, svc)
		}
	}
	if kinds["rscoord"] < 2 || kinds["/consumer-pod"] < 2 || kinds["/publisher-pod"] < 1 {
		t.Errorf("compose.yaml runs %v; want the coordinator (and its set-up), two consumer pods and a publisher", kinds)
	}

	checkComposeUsers(t, root, compose.Services)

	// Prometheus scrapes the coordinator's service at its listen port.
	prom := read("deploy/compose/prometheus.yml")
	if !strings.Contains(prom, `targets: ["rscoord:8080"]`) {
		t.Errorf("deploy/compose/prometheus.yml does not scrape rscoord:8080:\n%s", prom)
	}
}

// checkComposeCoordinator parses a service of the rscoord image with the
// real parser: serve with its --config file, or an admin command.
func checkComposeCoordinator(t *testing.T, root, name string, svc composeService) {
	t.Helper()
	if svc.Entrypoint != nil && !slices.Equal(svc.Entrypoint, image.Entrypoint()) {
		t.Errorf("%s: entrypoint %v, the image's is %v", name, svc.Entrypoint, image.Entrypoint())
	}
	args := slices.Clone(svc.Command)
	for i, a := range args {
		if i > 0 && args[i-1] == "--config" {
			// The container path of a file mounted from the repository.
			found := false
			for _, v := range svc.Volumes {
				parts := strings.Split(v, ":")
				if len(parts) >= 2 && parts[1] == a {
					args[i], found = filepath.Join(root, parts[0]), true
				}
			}
			if !found {
				t.Errorf("%s: --config %s is not mounted from the repository", name, a)
			}
		}
	}
	var cli CLI
	parser, err := newParser(context.Background(), &cli, strings.NewReader(""), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		t.Errorf("%s: rscoord %v: %v", name, args, err)
		return
	}
	envs := slices.Clone(secretEnv)
	for _, f := range kctx.Flags() {
		envs = append(envs, f.Tag.Envs...)
	}
	for k := range svc.Environment {
		if !slices.Contains(envs, k) {
			t.Errorf("%s: environment %s is read by no flag of rscoord %s", name, k, kctx.Command())
		}
	}
	if kctx.Command() != "serve" {
		return
	}
	s := cli.Serve
	if s.DataDir != image.DataDir || !slices.Contains(svc.Volumes, "rscoord-data:"+image.DataDir) {
		t.Errorf("%s: data dir %s, volumes %v; want %s on a named volume", name, s.DataDir, svc.Volumes, image.DataDir)
	}
	_, port, err := net.SplitHostPort(s.Listen)
	if err != nil || len(svc.Ports) != 1 || !strings.HasSuffix(svc.Ports[0], ":"+port) || port != "8080" {
		t.Errorf("%s: listens on %s, publishes %v; want container port 8080 published", name, s.Listen, svc.Ports)
	}
	if err := s.validate(); err != nil {
		t.Errorf("%s: serve flags: %v", name, err)
	}
	if len(s.Redis) != 3 {
		t.Errorf("%s: --redis %v, want the three cluster nodes", name, s.Redis)
	}
	checkComposeCoordinatorHealthcheck(t, name, svc, port)
}

// checkComposeCoordinatorHealthcheck: the coordinator's healthcheck is
// rscoord probe on its own /readyz (the image has no curl), a command line
// the real parser takes.
func checkComposeCoordinatorHealthcheck(t *testing.T, name string, svc composeService, port string) {
	t.Helper()
	want := []string{"CMD", image.BinaryPath, "probe", "http://127.0.0.1:" + port + "/readyz"}
	if svc.Healthcheck == nil || !slices.Equal(svc.Healthcheck.Test, want) {
		t.Errorf("%s: healthcheck %+v, want test %v", name, svc.Healthcheck, want)
		return
	}
	var cli CLI
	parser, err := newParser(context.Background(), &cli, strings.NewReader(""), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := parser.Parse(want[2:])
	if err != nil || kctx.Command() != "probe <url>" || cli.Probe.URL != want[3] {
		t.Errorf("%s: healthcheck %v does not parse as rscoord probe: %v", name, want, err)
	}
}

// TestComposeStartsInOrder checks compose.yaml's depends_on: each one
// names a condition; the one-shot set-up services (the Redis cluster's
// creation, the stream's) are waited for until they complete
// successfully; the coordinator until it is healthy; and every pod and
// the publisher start only once the stream exists, so nothing restarts in
// a loop waiting for what is not there yet.
func TestComposeStartsInOrder(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("compose.yaml (depends_on must be the long form, with conditions): %v", err)
	}
	oneShot := func(svc composeService) bool {
		cmd := strings.Join(svc.Command, " ")
		return strings.Contains(cmd, "--cluster create") || strings.HasPrefix(cmd, "stream create")
	}
	var coordinator, createStream string
	for name, svc := range compose.Services {
		switch {
		case svc.Image == composeCoordinatorImage && slices.Contains(svc.Command, "serve"):
			coordinator = name
		case svc.Image == composeCoordinatorImage && strings.HasPrefix(strings.Join(svc.Command, " "), "stream create"):
			createStream = name
		}
	}
	if coordinator == "" || createStream == "" {
		t.Fatalf("compose.yaml has no coordinator (%q) or stream creation (%q)", coordinator, createStream)
	}
	oneShots := 0
	for name, svc := range compose.Services {
		if oneShot(svc) {
			oneShots++
		}
		for dep, d := range svc.DependsOn {
			target, ok := compose.Services[dep]
			if !ok {
				t.Errorf("%s depends on %s, which is not a service", name, dep)
				continue
			}
			var want []string
			switch {
			case oneShot(target):
				want = []string{"service_completed_successfully"}
			case dep == coordinator:
				want = []string{"service_healthy"}
			case target.Healthcheck != nil:
				// Ordering only, or readiness: both are deliberate.
				want = []string{"service_started", "service_healthy"}
			default:
				want = []string{"service_started"}
			}
			if !slices.Contains(want, d.Condition) {
				t.Errorf("%s depends on %s with condition %q, want one of %v", name, dep, d.Condition, want)
			}
		}
		if svc.Image == composePodsImage {
			if d, ok := svc.DependsOn[createStream]; !ok || d.Condition != "service_completed_successfully" {
				t.Errorf("%s does not wait for %s to complete: it would start before the stream exists", name, createStream)
			}
		}
	}
	if oneShots != 2 {
		t.Errorf("found %d one-shot set-up services, want the Redis cluster's creation and the stream's", oneShots)
	}
	if d := compose.Services[coordinator].DependsOn; len(d) == 0 {
		t.Errorf("%s depends on nothing: it would start before the Redis cluster is formed", coordinator)
	}
}

// checkComposePod runs the pod binary with the service's command line and
// --help: kong refuses unknown flags before it prints help; and each
// environment variable must be one the pod's help names.
func checkComposePod(t *testing.T, name string, svc composeService) {
	t.Helper()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd"+svc.Entrypoint[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(slices.Clone(svc.Command), "--help")...)
	cmd.Env = []string{} // the help must not depend on this machine
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: %s %v --help: %v\n%s", name, svc.Entrypoint[0], svc.Command, err, out)
		return
	}
	for k := range svc.Environment {
		if !strings.Contains(string(out), "$"+k) && k != envRedisPassword {
			t.Errorf("%s: environment %s is read by no flag of %s", name, k, svc.Entrypoint[0])
		}
	}
	if svc.Entrypoint[0] == "/consumer-pod" {
		checkComposePodReady(t, name, bin, svc)
	}
}

// checkComposePodReady: a consumer pod serves /readyz (--health-listen)
// and its healthcheck probes that port with the pod binary itself (the
// image has no curl), with flags the binary parses.
func checkComposePodReady(t *testing.T, name, bin string, svc composeService) {
	t.Helper()
	i := slices.Index(svc.Command, "--health-listen")
	if i < 0 || i+1 >= len(svc.Command) {
		t.Errorf("%s: no --health-listen in %v", name, svc.Command)
		return
	}
	_, port, err := net.SplitHostPort(svc.Command[i+1])
	if err != nil {
		t.Errorf("%s: --health-listen %q: %v", name, svc.Command[i+1], err)
		return
	}
	want := []string{"CMD", svc.Entrypoint[0], "--probe", "http://127.0.0.1:" + port + "/readyz"}
	if svc.Healthcheck == nil || !slices.Equal(svc.Healthcheck.Test, want) {
		t.Errorf("%s: healthcheck %+v, want test %v", name, svc.Healthcheck, want)
		return
	}
	cmd := exec.Command(bin, append(slices.Clone(want[2:]), "--help")...)
	cmd.Env = []string{}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: healthcheck %v --help: %v\n%s", name, want, err, out)
	}
}

// checkComposeUsers: the coordinator reads the users file mounted from the
// repository, and every pod signs in as a user of it whose password
// matches its hash, a MEMBER on the pod's stream only (no WRITE, no
// ADMIN), bound to the member ids the consumer pods use.
func checkComposeUsers(t *testing.T, root string, services map[string]composeService) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy/compose/rscoord.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Users string `yaml:"users"`
	}
	if err := yaml.Unmarshal(raw, &conf); err != nil || conf.Users == "" {
		t.Fatalf("deploy/compose/rscoord.yaml names no users file (%v)", err)
	}
	var usersFile string
	for _, v := range services["rscoord"].Volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == conf.Users {
			usersFile = filepath.Join(root, parts[0])
		}
	}
	if usersFile == "" {
		t.Fatalf("the users file %s is not mounted into the rscoord service", conf.Users)
	}
	users, err := auth.LoadUsersFile(usersFile)
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	for name, svc := range services {
		if svc.Image != composePodsImage {
			continue
		}
		pods++
		env := svc.Environment
		i := slices.IndexFunc(users, func(u auth.User) bool { return u.Username == env["RSCOORD_USER"] })
		if i < 0 {
			t.Errorf("%s signs in as %q, not a user of %s", name, env["RSCOORD_USER"], usersFile)
			continue
		}
		u := users[i]
		if err := bcrypt.CompareHashAndPassword(u.PasswordHash, []byte(env["RSCOORD_PASSWORD"])); err != nil {
			t.Errorf("%s: RSCOORD_PASSWORD does not match %s's hash: %v", name, u.Username, err)
		}
		p := auth.Principal{Username: u.Username, Roles: u.Roles, Grants: u.Grants, MemberIDs: u.MemberIDs}
		stream := env["RSCOORD_STREAM"]
		if !p.AllowedOn(auth.PermMember, stream) || p.AllowedOn(auth.PermMember, "payments") ||
			p.AllowedOn(auth.PermWrite, stream) || p.Allowed(auth.PermAdmin) {
			t.Errorf("%s: %s must be a MEMBER on %s only, with no WRITE or ADMIN", name, u.Username, stream)
		}
		for j, a := range svc.Command {
			if a == "--base-id" && j+1 < len(svc.Command) && !p.MemberAllowed(svc.Command[j+1]+"-m0") {
				t.Errorf("%s: member ids %s-… are not bound to %s", name, svc.Command[j+1], u.Username)
			}
		}
	}
	if pods == 0 {
		t.Error("no pod services")
	}
}

// TestComposeHardening: compose.yaml exposes nothing beyond this machine
// and runs this repository's images with no more than they need: every
// published port is bound to 127.0.0.1 (the coordinator's metrics are
// public on the compose network, Grafana lets anonymous viewers in), and
// the containers of the rscoord and pods images drop every capability and
// cannot gain privileges (setuid files, file capabilities); the
// coordinator's root file system is read-only, its data volume the only
// place it writes.
func TestComposeHardening(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for name, svc := range compose.Services {
		for _, p := range svc.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %s beyond this machine; want 127.0.0.1:HOST:CONTAINER", name, p)
			}
		}
		if strings.HasPrefix(svc.Image, "grafana/") &&
			(svc.Environment["GF_AUTH_DISABLE_LOGIN_FORM"] != "true" || svc.Environment["GF_AUTH_BASIC_ENABLED"] != "false") {
			t.Errorf("%s: Grafana's default admin (admin/admin) can log in; want GF_AUTH_DISABLE_LOGIN_FORM true and GF_AUTH_BASIC_ENABLED false", name)
		}
		if svc.Image != composeCoordinatorImage && svc.Image != composePodsImage {
			continue
		}
		if !slices.Equal(svc.CapDrop, []string{"ALL"}) {
			t.Errorf("%s: cap_drop %v, want [ALL]", name, svc.CapDrop)
		}
		if !slices.Contains(svc.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: security_opt %v lacks no-new-privileges:true", name, svc.SecurityOpt)
		}
		if slices.Contains(svc.Command, "serve") && !svc.ReadOnly {
			t.Errorf("%s: the coordinator's root file system is writable; want read_only: true", name)
		}
	}
}
