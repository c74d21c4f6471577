//go:build !linux

package redistest

import "syscall"

// sysProcAttr is nil off Linux: there is no parent-death signal, so a test
// binary killed before its cleanups may leave redis-server running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
