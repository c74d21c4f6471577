// Package proctest builds the project's commands and runs them as real
// processes for end-to-end tests: started with arguments, their stderr
// kept line by line, signalled, waited for with bounds, and killed at the
// end of the test whatever happened.
package proctest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Builder builds main packages once into a temporary directory. Keep one
// per test binary (in TestMain) and Close it at the end.
type Builder struct {
	dir   string
	flags []string
	mu    sync.Mutex
	built map[string]string
}

// NewBuilder makes a builder with its own temporary directory. Flags are
// added to every go build it runs (see [RaceFlags]).
func NewBuilder(flags ...string) (*Builder, error) {
	dir, err := os.MkdirTemp("", "rscoord-proctest-")
	if err != nil {
		return nil, fmt.Errorf("proctest: %w", err)
	}
	return &Builder{dir: dir, flags: flags, built: map[string]string{}}, nil
}

// RaceFlags is -race when the test binary was built with the race
// detector, else nothing. A builder given them makes binaries that share
// the test build's race-instrumented packages in the build cache (no
// second compile of every dependency) and are checked for races too; they
// also run several times slower, so it suits a few light processes, not
// a load test.
func RaceFlags() []string {
	if raceEnabled {
		return []string{"-race"}
	}
	return nil
}

// Build builds the main package pkg (an import path such as
// github.com/rscoord/rscoord/cmd/rscoord) and returns the binary's path.
func (b *Builder) Build(ctx context.Context, pkg string) (string, error) {
	bins, err := b.BuildAll(ctx, pkg)
	if err != nil {
		return "", err
	}
	return bins[0], nil
}

// BuildAll builds the main packages pkgs (import paths) and returns their
// binaries' paths, in the order of pkgs. The ones not built yet are built
// by one go build, which compiles what they share once and links them in
// parallel: cheaper than one go build each.
func (b *Builder) BuildAll(ctx context.Context, pkgs ...string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var todo []string
	for _, pkg := range pkgs {
		if _, ok := b.built[pkg]; !ok && !slices.Contains(todo, pkg) {
			todo = append(todo, pkg)
		}
	}
	if len(todo) > 0 {
		// Each binary gets a directory of its own: go build -o DIR/ names
		// a binary after its package's last element, which two packages
		// may share.
		var out []string
		for _, pkg := range todo {
			d, err := os.MkdirTemp(b.dir, "bin-")
			if err != nil {
				return nil, fmt.Errorf("proctest: %w", err)
			}
			out = append(out, filepath.Join(d, filepath.Base(pkg)))
		}
		if len(todo) == 1 {
			args := append(append([]string{"build", "-o", out[0]}, b.flags...), todo[0])
			if msg, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("proctest: go build %s: %w\n%s", todo[0], err, msg)
			}
		} else {
			// One go build of all of them into a staging directory, then
			// each binary to its own.
			stage, err := os.MkdirTemp(b.dir, "stage-")
			if err != nil {
				return nil, fmt.Errorf("proctest: %w", err)
			}
			args := append(append([]string{"build", "-o", stage + string(filepath.Separator)}, b.flags...), todo...)
			if msg, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("proctest: go build %s: %w\n%s", strings.Join(todo, " "), err, msg)
			}
			for i, pkg := range todo {
				if err := os.Rename(filepath.Join(stage, filepath.Base(pkg)), out[i]); err != nil {
					return nil, fmt.Errorf("proctest: %s: %w", pkg, err)
				}
			}
		}
		for i, pkg := range todo {
			b.built[pkg] = out[i]
		}
	}
	bins := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		bins[i] = b.built[pkg]
	}
	return bins, nil
}

// Close removes every binary built.
func (b *Builder) Close() error { return os.RemoveAll(b.dir) }

// Process is a running command.
type Process struct {
	t    testing.TB
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []string
	wake  chan struct{}
}

// Start runs bin with args (and env added to the test's environment). Its
// stderr and stdout are collected; the process is killed at test cleanup
// if it still runs.
func Start(t testing.TB, name, bin string, args []string, env ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &Process{t: t, Name: name, cmd: cmd, done: make(chan struct{}), wake: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.wake)
			p.wake = make(chan struct{})
			p.mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		reader.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Output is everything the process printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// WaitForLine waits until a printed line satisfies match, returning it.
func (p *Process) WaitForLine(timeout time.Duration, match func(line string) bool) (string, error) {
	deadline := time.After(timeout)
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if match(p.lines[seen]) {
				line := p.lines[seen]
				p.mu.Unlock()
				return line, nil
			}
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-p.done:
			if line, err := p.lastChance(match); err == nil {
				return line, nil
			}
			if p.err == nil {
				return "", fmt.Errorf("%s exited 0 before the expected line; output:\n%s", p.Name, p.Output())
			}
			return "", fmt.Errorf("%s exited (%w) before the expected line; output:\n%s", p.Name, p.err, p.Output())
		case <-deadline:
			return "", fmt.Errorf("%s printed no expected line in %v; output:\n%s", p.Name, timeout, p.Output())
		}
	}
}

func (p *Process) lastChance(match func(string) bool) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if match(l) {
			return l, nil
		}
	}
	return "", fmt.Errorf("no match")
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Wait waits for the process to exit, at most timeout, and returns its
// exit error (nil for exit status 0). After the timeout it kills it.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v and was killed; output:\n%s", p.Name, timeout, p.Output())
	}
}

// Stop sends SIGTERM and waits for the exit like [Process.Wait]: a
// command that stops cleanly on SIGTERM returns nil.
func (p *Process) Stop(timeout time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil && !p.Exited() {
		return fmt.Errorf("%s: SIGTERM: %w", p.Name, err)
	}
	return p.Wait(timeout)
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
