package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/redis/go-redis/v9"
)

// Timing bounds of process management.
const (
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
	// readyTimeout bounds how long a fresh process may take to answer.
	readyTimeout = 10 * time.Second
	// startAttempts is how many ports StartServer tries when redis-server
	// exits at once (most often: another process took the port first).
	startAttempts = 5
	// logFile is the name of redis-server's log inside its directory.
	logFile = "redis.log"
	// outputFile receives redis-server's stdout and stderr (configuration
	// errors are printed there, before the log file is opened).
	outputFile = "redis.out"
)

// errExited marks a redis-server that exited before it answered PING.
var errExited = errors.New("redis-server exited during start-up")

// Server is one redis-server process on 127.0.0.1.
type Server struct {
	// Addr is "127.0.0.1:port"; it stays the same across Restart.
	Addr string
	// Port is the client port of Addr.
	Port int
	// TLSAddr and TLSPort are the TLS address and port of a server started
	// by StartTLSServer; empty and 0 otherwise.
	TLSAddr string
	TLSPort int
	// Dir is the server's working directory: its log (redis.log) and, for a
	// cluster node, nodes.conf live there.
	Dir string

	args []string // extra arguments, reused by Restart

	mu      sync.Mutex
	proc    *process        // nil while stopped
	clients []*redis.Client // made by Client, closed by Stop
}

// process is one run of redis-server; done closes once Wait has returned.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, readable after done
}

// StartServer starts redis-server on a free loopback port with dir as its
// working directory (created if missing) and no persistence, and returns
// once it answers. extraArgs are appended to the command line (e.g.
// "--cluster-enabled", "yes") and reused by Restart. If the chosen port is
// taken before redis-server binds it, another port is tried, up to 5 times.
// The caller must Stop the server.
func StartServer(ctx context.Context, dir string, extraArgs ...string) (*Server, error) {
	if dir == "" {
		return nil, errors.New("redistest: start server: empty directory")
	}
	if _, err := exec.LookPath(serverBinary); err != nil {
		return nil, fmt.Errorf("redistest: start server: %s", missingMessage)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("redistest: start server: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("redistest: start server: %w", err)
	}
	var errs []error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("redistest: start server: %w", err)
		}
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Port: port,
			Dir:  abs,
			args: append([]string(nil), extraArgs...),
		}
		err = s.start(ctx)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errExited) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("redistest: start server in %s: %w", dir, errors.Join(errs...))
}

// Standalone starts one redis-server for the test in a t.TempDir() and stops
// it in t.Cleanup. It fails the test if redis-server is missing or does not
// start.
func Standalone(t testing.TB) *Server {
	t.Helper()
	Require(t)
	dir := t.TempDir() // registered first, so removed after Stop
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := StartServer(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("redistest: stop %s: %v", s.Addr, err)
		}
	})
	return s
}

// Client returns a new go-redis client of this server with default options.
// Stop closes it; the caller may close it earlier. Clients survive Restart
// and Kill (they reconnect).
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c
}

// Stop closes the clients made by Client, then stops the process: SIGTERM,
// wait, SIGKILL if it is still running after 5 s, wait. Stopping a stopped
// server is a no-op. A stopped server can be started again with Restart.
func (s *Server) Stop() error {
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, c := range clients {
		_ = c.Close() // a caller may have closed it already
	}
	return s.stopProcess(syscall.SIGTERM)
}

// Kill ends the process at once with SIGKILL (a crash: no shutdown, no
// goodbye to cluster peers) and waits for it. Clients stay open, so a test
// can Restart the server and keep using them.
func (s *Server) Kill() error {
	return s.stopProcess(syscall.SIGKILL)
}

// Pause freezes the process (SIGSTOP): it keeps its connections but
// answers nothing until Resume. A test pausing a server must Resume it
// before Stop. Where the kernel says (/proc), Pause returns once every
// thread of the process is stopped: a signal is delivered asynchronously,
// and a test's next step must not race the stop.
func (s *Server) Pause() error {
	pid, err := s.signal(syscall.SIGSTOP)
	if err != nil {
		return err
	}
	for end := time.Now().Add(stopSeenTimeout); ; time.Sleep(time.Millisecond) {
		threads, err := procfs.AllThreads(pid)
		if err != nil {
			return nil // no /proc to ask (another OS): the signal is sent
		}
		running := 0
		for _, t := range threads {
			if st, err := t.Stat(); err == nil && st.State != "T" && st.State != "t" {
				running++
			}
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("redistest: %s: %d threads still running %v after SIGSTOP", s.Addr, running, stopSeenTimeout)
		}
	}
}

// stopSeenTimeout bounds Pause's wait for the stop to show.
const stopSeenTimeout = 5 * time.Second

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() error {
	_, err := s.signal(syscall.SIGCONT)
	return err
}

// signal sends sig to the process and returns its id.
func (s *Server) signal(sig syscall.Signal) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0, errors.New("redis-server is not running")
	}
	return s.proc.cmd.Process.Pid, s.proc.cmd.Process.Signal(sig)
}

// Restart stops the process if it runs (SIGTERM, as Stop, but keeping the
// clients) and starts it again on the same port, in the same directory,
// with the same arguments; a cluster node rejoins from its nodes.conf. It
// retries while the port is still being released, until ctx ends or 10 s
// pass.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.stopProcess(syscall.SIGTERM); err != nil {
		return fmt.Errorf("redistest: restart %s: %w", s.Addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		err := s.start(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errExited) {
			return fmt.Errorf("redistest: restart %s: %w", s.Addr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: restart %s: %w", s.Addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Running reports whether the process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return false
	}
	select {
	case <-s.proc.done:
		return false
	default:
		return true
	}
}

// start runs redis-server on s.Port and waits until it answers PING and
// reports its own process id, so a server that lost the port race to
// another redis-server is never mistaken for ours.
func (s *Server) start(ctx context.Context) error {
	args := []string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--logfile", filepath.Join(s.Dir, logFile),
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
	}
	args = append(args, s.args...)
	out, err := os.OpenFile(filepath.Join(s.Dir, outputFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open output file: %w", err)
	}
	defer out.Close() // the child keeps its own descriptor
	cmd := exec.Command(serverBinary, args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = out, out // *os.File: no copying goroutine
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec %s: %w", serverBinary, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { // owned by p; ends when the process exits
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if err := s.awaitReady(ctx, p); err != nil {
		_ = s.stopProcess(syscall.SIGKILL)
		return err
	}
	return nil
}

// awaitReady polls the server until INFO server shows our process id, the
// process exits (errExited), or ctx or readyTimeout ends. It speaks RESP over
// a plain connection: a go-redis client would log every refused dial.
func (s *Server) awaitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	want := "process_id:" + strconv.Itoa(p.cmd.Process.Pid) + "\r\n"
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-p.done:
			return s.exitedError(p)
		default:
		}
		info, err := infoServer(ctx, s.Addr)
		if err == nil && strings.Contains(info, want) {
			return nil
		}
		if err == nil {
			err = errors.New("another redis-server answers on this port")
		}
		last = err
		select {
		case <-p.done:
			return s.exitedError(p)
		case <-ctx.Done():
			return fmt.Errorf("wait for redis-server on %s: %w (last error: %w): %s", s.Addr, ctx.Err(), last, s.logTail())
		case <-tick.C:
		}
	}
}

// exitedError describes a process that exited during start-up, wrapping
// what Wait returned. A configuration error is not errExited: another port
// would not help.
func (s *Server) exitedError(p *process) error {
	tail := s.logTail()
	status := p.err
	if status == nil {
		status = errors.New("exit status 0")
	}
	if strings.Contains(tail, "FATAL CONFIG") {
		return fmt.Errorf("redis-server on %s rejected its configuration (%w): %s", s.Addr, status, tail)
	}
	return fmt.Errorf("%w on %s (%w): %s", errExited, s.Addr, status, tail)
}

// infoServer sends INFO server on a fresh connection and returns the bulk
// string answered.
func infoServer(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	head = strings.TrimRight(head, "\r\n")
	if !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("INFO answered %q", head) // e.g. -LOADING
	}
	n, err := strconv.Atoi(head[1:])
	if err != nil || n < 0 {
		return "", fmt.Errorf("INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// stopProcess sends sig, waits up to stopGrace, then SIGKILLs and waits.
func (s *Server) stopProcess(sig syscall.Signal) error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(sig) // fails only if it already exited
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return fmt.Errorf("redis-server on %s ignored SIGTERM for %v and was killed", s.Addr, stopGrace)
	case <-time.After(stopGrace):
		return fmt.Errorf("redis-server on %s (pid %d) did not exit after SIGKILL", s.Addr, p.cmd.Process.Pid)
	}
}

// logTail is the end of the server's output and log, for error messages:
// configuration errors go to the output, before the log is opened.
func (s *Server) logTail() string {
	var out []string
	for _, name := range []string{outputFile, logFile} {
		b, err := os.ReadFile(filepath.Join(s.Dir, name))
		if err != nil {
			continue
		}
		b = bytes.TrimSpace(b)
		if len(b) > 1500 {
			b = b[len(b)-1500:]
		}
		if len(b) > 0 {
			out = append(out, name+":\n"+string(b))
		}
	}
	if len(out) == 0 {
		return "no output, no log"
	}
	return strings.Join(out, "\n")
}
