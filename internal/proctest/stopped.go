package proctest

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// PauseTimeout bounds how long [Process.Pause] waits for the stop to show.
const PauseTimeout = 5 * time.Second

// AwaitStopped returns once /proc shows every thread of process pid
// stopped (SIGSTOP), or ctx's error with how many still run. kill(2)
// returns before the stop takes effect: the kernel stops the threads one
// by one as each is next scheduled, and on a loaded machine a thread may
// still serve a request for milliseconds after the signal was sent. A
// test whose next step assumes a frozen process must wait for this.
func AwaitStopped(ctx context.Context, pid int) error {
	for {
		threads, err := procfs.AllThreads(pid)
		if err != nil {
			return fmt.Errorf("proctest: threads of %d: %w", pid, err)
		}
		running := 0
		for _, t := range threads {
			if st, err := t.Stat(); err == nil && st.State != "T" && st.State != "t" {
				running++
			}
		}
		if running == 0 && len(threads) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proctest: %d of %d threads of %d still running after SIGSTOP: %w", running, len(threads), pid, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Pause freezes the process (SIGSTOP) and returns once every thread of it
// is stopped, at most [PauseTimeout]. Resume it with Signal(SIGCONT).
func (p *Process) Pause() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("proctest: %s: SIGSTOP: %w", p.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), PauseTimeout)
	defer cancel()
	if err := AwaitStopped(ctx, p.Pid()); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err) // AwaitStopped's error names the package
	}
	return nil
}
