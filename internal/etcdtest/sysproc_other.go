//go:build !linux

package etcdtest

import "syscall"

// sysProcAttr is nil off Linux: there is no parent-death signal, so a test
// binary killed before its cleanups may leave etcd running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
