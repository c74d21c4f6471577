//go:build !linux

package bench

import "syscall"

// sysProcAttr is nil off Linux: there is no parent-death signal; the held
// members' process ends at the end of its pipe.
func sysProcAttr() *syscall.SysProcAttr { return nil }
