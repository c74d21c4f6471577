package bench

import "syscall"

// sysProcAttr asks the kernel to kill the held members' process when the
// bench dies without closing its pipe, so no load outlives its bench.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
