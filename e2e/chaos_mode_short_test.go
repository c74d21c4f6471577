//go:build !chaos

package e2e

// Without the chaos build tag TestChaos runs the short schedule: one seed,
// the six ownership faults, part of the normal suite.
const (
	chaosLong          = false
	chaosDefaultFaults = 6
	chaosDefaultSeed   = 7
)
