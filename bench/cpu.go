package bench

import (
	"fmt"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// ProcessCPU returns a reader of the CPU time (user and system, all its
// threads) process pid has used so far, from /proc/PID/stat.
func ProcessCPU(pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		p, err := procfs.NewProc(pid)
		if err != nil {
			return 0, fmt.Errorf("process CPU: %w", err)
		}
		st, err := p.Stat()
		if err != nil {
			return 0, fmt.Errorf("process CPU: %w", err)
		}
		return time.Duration(st.CPUTime() * float64(time.Second)), nil
	}
}

// selfCPU is the CPU time (user and system) this process has used so far.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("own CPU: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
