package etcdtest

import (
	"os/exec"
	"testing"
)

// serverBinary is the etcd executable looked up on PATH.
const serverBinary = "etcd"

// missingMessage is what Require reports when etcd is not installed.
const missingMessage = "etcd not found on PATH: install it with `apt-get install etcd-server` (Debian/Ubuntu) or run .ci/run, which installs it"

// Require fails the test at once, with a message saying how to install it,
// when etcd is not on PATH.
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(serverBinary); err != nil {
		t.Fatal(missingMessage)
	}
}
