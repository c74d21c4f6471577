package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/coordtest"
	"github.com/rscoord/rscoord/protocol"
)

// buildBinary builds this command once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "rscoord-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "rscoord")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

// removeBinary deletes what buildBinary built, if it ran.
func removeBinary() {
	if bin, err := buildBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// process is a running coordinator binary.
type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan error
}

type lockedBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lockedBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// startProcess runs `rscoord serve` on dataDir at a free port and waits
// until it listens.
func startProcess(t *testing.T, dataDir string, extra ...string) *process {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"}, extra...)
	cmd := exec.Command(bin, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{t: t, cmd: cmd, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.stderr.add(line)
			var rec struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "rscoord listening" {
				addr <- rec.Address
			}
		}
		p.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("coordinator did not start listening; stderr:\n%s", p.stderr)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends sig and waits for the process to exit, returning its error.
func (p *process) stop(sig syscall.Signal) error {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		p.t.Fatalf("coordinator did not exit after %v; stderr:\n%s", sig, p.stderr)
		return nil
	}
}

func TestBinaryRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			data := filepath.Join(dir, sig.String())
			p := startProcess(t, data)
			s := coordtest.Remote(t, p.url)
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
					t.Fatalf("SIGTERM exit: %v; stderr:\n%s", err, p.stderr)
				}
				if !strings.Contains(p.stderr.String(), "rscoord stopped cleanly") {
					t.Fatalf("no clean stop logged; stderr:\n%s", p.stderr)
				}
			}

			p = startProcess(t, data)
			s = coordtest.Remote(t, p.url)
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
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "RSCOORD_DATA_DIR="+t.TempDir(), "RSCOORD_MEMBER_LEASE=1s", "RSCOORD_HEARTBEAT_INTERVAL=2s")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "member lease") {
		t.Fatalf("a lease shorter than the interval from the environment must be refused; got err=%v:\n%s", err, out)
	}
}
