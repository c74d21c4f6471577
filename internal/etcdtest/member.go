package etcdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rscoord/rscoord/internal/proctest"
)

// Timing bounds of process management.
const (
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
	// listenTimeout bounds how long a fresh process may take to accept
	// connections on its client port.
	listenTimeout = 15 * time.Second
	// logFile receives etcd's stdout and stderr (its log) in the member's
	// directory.
	logFile = "etcd.log"
)

// errExited marks an etcd that exited before it listened (most often:
// another process took one of its ports first).
var errExited = errors.New("etcd exited during start-up")

// Member is one etcd server process of a [Cluster]. Its URLs, name and data
// directory stay the same across Kill and Restart, so a restarted member
// rejoins from its write-ahead log.
type Member struct {
	// Name is the etcd member name (etcd-0, etcd-1, …).
	Name string
	// ClientURL is http://127.0.0.1:port, the URL clients dial.
	ClientURL string
	// PeerURL is the URL the members use among themselves.
	PeerURL string
	// Dir holds the data directory (data/) and the log (etcd.log).
	Dir string

	args []string // full command line after the binary, reused by Restart

	mu     sync.Mutex
	proc   *process // nil while stopped
	paused bool     // SIGSTOPped and not yet SIGCONTinued
}

// process is one run of etcd; done closes once Wait has returned.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, readable after done
}

// newMember prepares (does not start) a member named name.
func newMember(name, dir string, clientPort, peerPort int, initialCluster, token string) *Member {
	m := &Member{
		Name:      name,
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		Dir:       dir,
	}
	m.args = []string{
		"--name", name,
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL,
		"--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", initialCluster,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		"--logger", "zap",
		"--log-outputs", "stderr",
	}
	return m
}

// start runs etcd and returns once it accepts connections on its client
// port. It does not wait for a leader: a member restarted while its peers
// are down listens but cannot serve (see [Cluster.WaitHealthy]).
func (m *Member) start(ctx context.Context) error {
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", m.Name, err)
	}
	out, err := os.OpenFile(filepath.Join(m.Dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", m.Name, err)
	}
	defer out.Close() // the child keeps its own descriptor
	cmd := exec.Command(serverBinary, m.args...)
	cmd.Dir = m.Dir
	cmd.Stdout, cmd.Stderr = out, out // *os.File: no copying goroutine
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: exec %s: %w", serverBinary, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { // owned by p; ends when the process exits
		p.err = cmd.Wait()
		close(p.done)
	}()
	m.mu.Lock()
	m.proc, m.paused = p, false
	m.mu.Unlock()
	if err := m.awaitListen(ctx, p); err != nil {
		_ = m.signalAndWait(syscall.SIGKILL)
		return err
	}
	return nil
}

// exitedError is errExited for p, which has exited, wrapping what Wait
// returned.
func (m *Member) exitedError(p *process) error {
	status := p.err
	if status == nil {
		status = errors.New("exit status 0")
	}
	return fmt.Errorf("%w: %s (%w): %s", errExited, m.Name, status, m.LogTail())
}

// awaitListen polls the client port until it accepts a connection, the
// process exits (errExited) or ctx or listenTimeout ends.
func (m *Member) awaitListen(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	u, err := url.Parse(m.ClientURL)
	if err != nil {
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err == nil {
			_ = conn.Close()
			select {
			case <-p.done: // someone else listens on our port
				return m.exitedError(p)
			default:
				return nil
			}
		}
		select {
		case <-p.done:
			return m.exitedError(p)
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: %s does not listen on %s: %w: %s", m.Name, m.ClientURL, ctx.Err(), m.LogTail())
		case <-tick.C:
		}
	}
}

// Running reports whether the process runs (paused counts as running).
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return false
	}
	select {
	case <-m.proc.done:
		return false
	default:
		return true
	}
}

// Pid is the process id, 0 when the member is not running.
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

// Kill ends the process at once with SIGKILL (a crash) and waits for it.
// Killing a stopped member is a no-op.
func (m *Member) Kill() error { return m.signalAndWait(syscall.SIGKILL) }

// Stop ends the process with SIGTERM, and SIGKILL if it still runs 5 s
// later, and waits for it;
// a paused member is resumed first so that it can handle the signal.
func (m *Member) Stop() error { return m.signalAndWait(syscall.SIGTERM) }

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing, as a machine that froze. It returns once every thread of the
// process is stopped: the signal only asks for it, and a thread still
// running could answer a request sent right after. Resume undoes it.
func (m *Member) Pause() error {
	if err := m.pauseOrResume(true); err != nil {
		return err
	}
	m.mu.Lock()
	pid := m.proc.cmd.Process.Pid
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), proctest.PauseTimeout)
	defer cancel()
	if err := proctest.AwaitStopped(ctx, pid); err != nil {
		return fmt.Errorf("etcdtest: %s: %w", m.Name, err)
	}
	return nil
}

// Resume continues a paused process with SIGCONT.
func (m *Member) Resume() error { return m.pauseOrResume(false) }

func (m *Member) pauseOrResume(pause bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return fmt.Errorf("etcdtest: %s is not running", m.Name)
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := m.proc.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("etcdtest: %s: %v: %w", m.Name, sig, err)
	}
	m.paused = pause
	return nil
}

// Restart stops the process if it runs (SIGTERM) and starts it again with
// the same name, URLs and data directory; it returns once the member
// listens, which is before it has caught up with its peers. It retries while
// the ports are still being released, until ctx ends or 15 s pass.
func (m *Member) Restart(ctx context.Context) error {
	if err := m.Stop(); err != nil {
		return fmt.Errorf("etcdtest: restart %s: %w", m.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	for {
		err := m.start(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errExited) {
			return fmt.Errorf("etcdtest: restart %s: %w", m.Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: restart %s: %w", m.Name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// signalAndWait sends sig (after SIGCONT if paused), waits up to stopGrace,
// then SIGKILLs and waits.
func (m *Member) signalAndWait(sig syscall.Signal) error {
	m.mu.Lock()
	p, paused := m.proc, m.paused
	m.proc, m.paused = nil, false
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(sig) // fails only if it already exited
	if paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	// etcd may spend longer than the grace trying to hand leadership to
	// peers that are gone; killing it then is what a test wants.
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
		return fmt.Errorf("etcdtest: %s (pid %d) did not exit after SIGKILL", m.Name, p.cmd.Process.Pid)
	}
}

// Healthy asks the member's /health endpoint, which answers true only when
// the member has a leader and serves reads: a member cut from its quorum
// answers false.
func (m *Member) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/health", nil)
	if err != nil {
		return err
	}
	// No kept connections: nothing idle is left for goleak to find.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("etcdtest: %s health: %w", m.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return fmt.Errorf("etcdtest: %s health: %w", m.Name, err)
	}
	var h struct {
		Health string `json:"health"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Health != "true" {
		return fmt.Errorf("etcdtest: %s not healthy: %s %s", m.Name, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// LogTail is the end of the member's log, for error messages.
func (m *Member) LogTail() string {
	b, err := os.ReadFile(filepath.Join(m.Dir, logFile))
	if err != nil {
		return "no log: " + err.Error()
	}
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
