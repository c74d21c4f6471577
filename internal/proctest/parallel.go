package proctest

import (
	"flag"
	"strconv"
)

// DefaultParallel lets n parallel tests of this test binary run at once
// unless the command line set -test.parallel. Call it in TestMain before
// m.Run. The go command's default, GOMAXPROCS, suits tests that compute;
// tests that run processes spend most of their time waiting for them
// (leases, start-ups, hand-offs), so a package of those finishes sooner
// with more of them at once. It parses the command line, as m.Run would.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if !set {
		// The flag exists in every test binary; Set fails only on a bad value.
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
