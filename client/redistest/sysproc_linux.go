package redistest

import "syscall"

// sysProcAttr asks the kernel to kill redis-server when the test process
// dies without running its cleanups (e.g. killed by a test timeout), so no
// server outlives its test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
