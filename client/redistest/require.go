package redistest

import (
	"os/exec"
	"testing"
)

// serverBinary is the redis-server executable looked up on PATH.
const serverBinary = "redis-server"

// missingMessage is what Require reports when redis-server is not installed.
const missingMessage = "redis-server not found on PATH: install it with `apt-get install redis-server` (Debian/Ubuntu) or run `go tool task test`, which installs it"

// Require fails the test at once, with a message saying how to install it,
// when redis-server is not on PATH.
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(serverBinary); err != nil {
		t.Fatal(missingMessage)
	}
}
