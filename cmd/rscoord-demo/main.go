// Command rscoord-demo runs a small rscoord deployment on this machine so
// that a new user sees records flow within a minute: a Redis (started here
// when none answers on --redis), the coordinator with --redis, a stream
// with its consumer group, two consumer pods and a publisher at a steady
// rate. It prints where to look, runs until Ctrl-C (SIGINT or SIGTERM),
// then stops everything it started, in reverse order, and exits 0.
//
//	go tool task demo          # builds the binaries and runs this
//
// The admin password is RSCOORD_ADMIN_PASSWORD when set, else generated and
// printed. The pods sign in as a MEMBER user from a users file written
// under --dir, so the demo works whether heartbeats need credentials or not.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// CLI is the demo's command line.
type CLI struct {
	Listen    string        `default:"127.0.0.1:8080" help:"Address of the coordinator."`
	Redis     string        `default:"127.0.0.1:6379" help:"Redis address; a redis-server is started there (and stopped at the end) when none answers."`
	Dir       string        `default:"./.demo" help:"Working directory: data, logs, users file. Emptied at start when the demo made it (a non-empty directory it did not make is refused)."`
	Bin       string        `default:"./bin" help:"Directory holding the rscoord, consumer-pod and publisher-pod binaries."`
	Stream    string        `default:"orders" help:"Stream prefix (its consumer group has the same name)."`
	Shards    int           `default:"4" help:"Shard count of the stream."`
	Consumers int           `default:"2" help:"Consumer pods."`
	Rate      float64       `default:"20" help:"Records per second the publisher sends."`
	StopAfter time.Duration `help:"Stop on its own after this long (0: run until Ctrl-C)."`
}

// demoMarker is the file that marks a --dir the demo made: only such a
// directory (or an empty one) is emptied at start, so a mistyped --dir
// cannot wipe someone's files.
const demoMarker = ".rscoord-demo"

// memberUser is the MEMBER user the pods authenticate as.
const memberUser = "demo-member"

func main() {
	var cli CLI
	kong.Parse(&cli, kong.Name("rscoord-demo"), kong.Description("Run a local rscoord demo until Ctrl-C."))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cli, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "rscoord-demo: %v\n", err)
		os.Exit(1)
	}
}

// demo holds what run started, to stop it in reverse order.
type demo struct {
	cli     CLI
	out     io.Writer
	started []*child
}

// child is one process the demo started.
type child struct {
	name string
	// pod marks a consumer pod: the demo goes on without it.
	pod  bool
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func run(ctx context.Context, cli CLI, out io.Writer) (err error) {
	d := &demo{cli: cli, out: out}
	defer func() {
		if stopErr := d.stopAll(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err := checkListenFree(cli.Listen); err != nil {
		return err
	}
	if err := resetDir(cli.Dir); err != nil {
		return err
	}
	if err := d.startRedis(ctx); err != nil {
		return err
	}
	adminPassword, generated := os.Getenv("RSCOORD_ADMIN_PASSWORD"), false
	if adminPassword == "" {
		adminPassword, generated = randomSecret(), true
	}
	memberPassword := randomSecret()
	usersFile, err := d.writeUsers(memberPassword)
	if err != nil {
		return err
	}
	base := "http://" + cli.Listen
	if err := d.start(ctx, "rscoord", "rscoord", []string{"RSCOORD_ADMIN_PASSWORD=" + adminPassword},
		"serve", "--listen", cli.Listen, "--data-dir", filepath.Join(cli.Dir, "data"),
		"--redis", cli.Redis, "--users", usersFile); err != nil {
		return err
	}
	coord, err := newClient(base, adminPassword)
	if err != nil {
		return err
	}
	defer coord.CloseIdleConnections()
	if err := waitHealthy(ctx, coord, 30*time.Second); err != nil {
		return fmt.Errorf("coordinator: %w (see %s)", err, filepath.Join(cli.Dir, "rscoord.log"))
	}
	if err := createStream(ctx, coord, cli.Stream, cli.Shards); err != nil {
		return err
	}
	memberEnv := []string{"RSCOORD_USER=" + memberUser, "RSCOORD_PASSWORD=" + memberPassword}
	for i := range cli.Consumers {
		name := fmt.Sprintf("consumer-%c", 'a'+i)
		if err := d.start(ctx, name, "consumer-pod", append(memberEnv, "POD_NAME="+name), d.podArgs(base, name)...); err != nil {
			return err
		}
		d.started[len(d.started)-1].pod = true
	}
	if err := d.start(ctx, "publisher", "publisher-pod", append(memberEnv, "POD_NAME=publisher"),
		"--coordinator", base, "--redis", cli.Redis, "--stream", cli.Stream,
		"--rate", strconv.FormatFloat(cli.Rate, 'f', -1, 64), "--count", strconv.Itoa(1<<31-1)); err != nil {
		return err
	}
	d.banner(base, adminPassword, generated)
	d.podHelp(base, memberPassword)
	return d.wait(ctx)
}

// checkListenFree fails when something already accepts connections on
// listen: the demo's coordinator could not bind it, and the demo would
// then talk to that other server (whose 401 or data would be taken for
// the demo's own).
func checkListenFree(listen string) error {
	conn, err := net.DialTimeout("tcp", listen, time.Second)
	if err != nil {
		return nil
	}
	conn.Close()
	return fmt.Errorf("something already listens on %s (a coordinator from go tool task run, or an earlier demo?): stop it, or give the demo another --listen", listen)
}

// resetDir empties dir for a new run and marks it as the demo's. A
// directory that exists, is not empty and lacks the marker is refused.
func resetDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("--dir %s: %w", dir, err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, demoMarker)); err != nil {
			return fmt.Errorf("--dir %s holds files the demo did not write (no %s in it): give another --dir, or empty it yourself", dir, demoMarker)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("empty %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--dir %s: %w", dir, err)
	}
	marker := filepath.Join(dir, demoMarker)
	if err := os.WriteFile(marker, []byte("made by rscoord-demo; emptied at its next start\n"), 0o600); err != nil {
		return fmt.Errorf("--dir %s: %w", dir, err)
	}
	return nil
}

// startRedis starts redis-server on cli.Redis unless something answers
// there already (then that Redis is used and left alone).
func (d *demo) startRedis(ctx context.Context) error {
	if conn, err := net.DialTimeout("tcp", d.cli.Redis, time.Second); err == nil {
		conn.Close()
		fmt.Fprintf(d.out, "Using the Redis already listening on %s.\n", d.cli.Redis)
		return nil
	}
	host, port, err := net.SplitHostPort(d.cli.Redis)
	if err != nil {
		return fmt.Errorf("--redis %q: %w", d.cli.Redis, err)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errors.New("redis-server not found on PATH: install it (go tool task redis:install) or start a Redis on --redis")
	}
	dir, err := filepath.Abs(filepath.Join(d.cli.Dir, "redis"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := d.startPath(ctx, "redis-server", bin, nil,
		"--port", port, "--bind", host, "--dir", dir, "--save", "", "--appendonly", "no"); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", d.cli.Redis, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not listen on %s within 10s (see %s)", d.cli.Redis, filepath.Join(d.cli.Dir, "redis-server.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeUsers writes the users file with the pods' MEMBER user.
func (d *demo) writeUsers(password string) (string, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", err
	}
	users := map[string]any{"users": []map[string]any{
		{"username": memberUser, "passwordHash": string(hash), "roles": []string{"MEMBER", "READ"}},
	}}
	raw, err := json.MarshalIndent(users, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(d.cli.Dir, "users.json")
	return path, os.WriteFile(path, raw, 0o600)
}

// start runs one of the project's binaries from cli.Bin as name.
func (d *demo) start(ctx context.Context, name, binary string, env []string, args ...string) error {
	return d.startPath(ctx, name, filepath.Join(d.cli.Bin, binary), env, args...)
}

// startPath runs bin with its output in <dir>/<name>.log. Each child gets
// a process group of its own: a Ctrl-C reaches only the demo, which then
// stops its children in order (pods before the coordinator before Redis).
func (d *demo) startPath(_ context.Context, name, bin string, env []string, args ...string) error {
	logPath := filepath.Join(d.cli.Dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	d.started = append(d.started, c)
	return nil
}

// wait runs until ctx ends (Ctrl-C), --stop-after passes, or a child exits
// on its own (an error: the demo cannot go on without it).
func (d *demo) wait(ctx context.Context) error {
	var timer <-chan time.Time
	if d.cli.StopAfter > 0 {
		timer = time.After(d.cli.StopAfter)
	}
	exited := make(chan *child, len(d.started))
	for _, c := range d.started {
		go func() {
			select {
			case <-c.done:
				exited <- c
			case <-ctx.Done():
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(d.out, "\nStopping the demo…")
			return nil
		case <-timer:
			fmt.Fprintln(d.out, "Stopping the demo (--stop-after)…")
			return nil
		case c := <-exited:
			why := "exit status 0"
			if c.err != nil {
				why = c.err.Error()
			}
			if c.pod {
				// A consumer pod that dies is what the demo is for: the
				// others take its shards once its lease lapses.
				fmt.Fprintf(d.out, "%s exited (%s; log %s): the other pods take over its shards once its lease lapses. The demo goes on.\n",
					c.name, why, c.log)
				continue
			}
			return fmt.Errorf("%s exited on its own (%s); see %s", c.name, why, c.log)
		}
	}
}

// stopAll stops every child in reverse start order: SIGTERM, then SIGKILL
// after 20 s. It reports children that had to be killed.
func (d *demo) stopAll() error {
	var errs []error
	for i := len(d.started) - 1; i >= 0; i-- {
		c := d.started[i]
		select {
		case <-c.done:
			continue
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
			errs = append(errs, fmt.Errorf("%s did not stop within 20s of SIGTERM and was killed", c.name))
		}
		fmt.Fprintf(d.out, "  stopped %s\n", c.name)
	}
	d.started = nil
	return errors.Join(errs...)
}

// banner says what runs and where to look.
func (d *demo) banner(base, adminPassword string, generated bool) {
	pw := "from RSCOORD_ADMIN_PASSWORD"
	if generated {
		pw = adminPassword + "   (generated; set RSCOORD_ADMIN_PASSWORD to choose it)"
	}
	fmt.Fprintf(d.out, `
rscoord demo is running.

  console      %[1]s/console      user admin, password %[2]s
  coordinator  %[1]s (data in %[3]s/data, log %[3]s/rscoord.log)
  redis        %[4]s
  stream       %[5]s with %[6]d shards, consumer group %[5]s
  pods         %[7]d consumer pods, one publisher at %[8]g records/s (logs in %[3]s)

What to look at:
  - the console: group %[5]s/%[5]s, its members, which member owns which shard, lag per shard
  - the CLI, in another terminal:
      export RSCOORD_USER=admin RSCOORD_PASSWORD='%[9]s'
      ./bin/rscoord group members %[5]s %[5]s
      ./bin/rscoord shards %[5]s %[5]s
      ./bin/rscoord stream scale %[5]s --to 8 --reason demo --wait
  - records handled per pod: wc -l %[3]s/consumer-*.events.jsonl

Press Ctrl-C to stop everything the demo started.
`, base, pw, d.cli.Dir, d.cli.Redis, d.cli.Stream, d.cli.Shards, d.cli.Consumers, d.cli.Rate, adminPassword)
}

// podArgs are the arguments of consumer pod name.
func (d *demo) podArgs(base, name string) []string {
	return []string{"--coordinator", base, "--redis", d.cli.Redis, "--stream", d.cli.Stream, "--group", d.cli.Stream,
		"--base-id", name, "--concurrency", "1", "--workers", "2",
		"--events-log", filepath.Join(d.cli.Dir, name+".events.jsonl")}
}

// podHelp says how to kill a consumer pod and how to add one, so that a
// failover can be watched in the console.
func (d *demo) podHelp(base, memberPassword string) {
	fmt.Fprintln(d.out, "Watch a failover: kill a consumer pod; the demo goes on and the others take its shards.")
	for _, c := range d.started {
		if c.pod {
			fmt.Fprintf(d.out, "  kill %d        # %s\n", c.cmd.Process.Pid, c.name)
		}
	}
	name := fmt.Sprintf("consumer-%c", 'a'+d.cli.Consumers)
	fmt.Fprintf(d.out, "Add a pod, in another terminal (Ctrl-C there stops it):\n  RSCOORD_USER=%s RSCOORD_PASSWORD='%s' POD_NAME=%s %s",
		memberUser, memberPassword, name, filepath.Join(d.cli.Bin, "consumer-pod"))
	for _, a := range d.podArgs(base, name) {
		fmt.Fprintf(d.out, " %s", a)
	}
	fmt.Fprintln(d.out)
}

// newClient is the demo's client of the coordinator at base, as the
// admin with adminPassword.
func newClient(base, adminPassword string) (*coordclient.Client, error) {
	return coordclient.New([]string{base}, coordclient.Options{
		Authorization: coordclient.BasicAuth("admin", adminPassword),
		UserAgent:     "rscoord-demo",
		Timeout:       10 * time.Second,
	})
}

// waitHealthy polls the coordinator's /healthz until it answers 200.
func waitHealthy(ctx context.Context, c *coordclient.Client, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		_, err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/healthz did not answer 200 within %s: %w", c.URL(), within, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createStream creates the stream (and its group of the same name).
func createStream(ctx context.Context, c *coordclient.Client, stream string, shards int) error {
	_, err := c.Do(ctx, http.MethodPost, coordclient.StreamPath(stream),
		protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: "rscoord-demo", Reason: "demo"}, nil)
	if err != nil {
		return fmt.Errorf("create stream %s: %w", stream, err)
	}
	return nil
}

// randomSecret is 18 random bytes in URL-safe base64 (24 characters).
func randomSecret() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}
