package proctest_test

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/internal/proctest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// Pause returns only once the kernel shows every thread stopped, whether
// the process was asleep or busy on a CPU when the signal came; once it
// runs again AwaitStopped says so instead of returning.
func TestPauseWaitsForTheStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  string
		args []string
	}{
		{"asleep", "sleep", []string{"60"}},
		{"busy", "sh", []string{"-c", "while :; do :; done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, err := exec.LookPath(tc.bin)
			if err != nil {
				t.Fatal(err)
			}
			p := proctest.Start(t, tc.name, bin, tc.args)
			if err := p.Pause(); err != nil {
				t.Fatal(err)
			}
			threads, err := procfs.AllThreads(p.Pid())
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range threads {
				st, err := th.Stat()
				if err != nil {
					t.Fatal(err)
				}
				if st.State != "T" && st.State != "t" {
					t.Fatalf("thread %d in state %s after Pause returned", st.PID, st.State)
				}
			}
			if err := p.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			// SIGCONT takes effect at once: a continued thread is runnable.
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			if err := proctest.AwaitStopped(ctx, p.Pid()); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("AwaitStopped of a continued process: %v", err)
			}
			if err := p.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = p.Wait(10 * time.Second)
		})
	}
}
