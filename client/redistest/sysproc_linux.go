package redistest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

// sysProcAttr asks the kernel to kill redis-server when the test process
// dies without running its cleanups (e.g. killed by a test timeout), so no
// server outlives its test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processStopped reads the state of process pid from /proc: stopped ('T')
// or not. known is false when /proc has no answer.
func processStopped(pid int) (stopped, known bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, false
	}
	// The state follows the command name, which is in parentheses and
	// may itself hold spaces or parentheses: read after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false, false
	}
	return stat[i+2] == 'T', true
}
