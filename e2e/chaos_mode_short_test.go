//go:build !chaos

package e2e

// Without the chaos build tag TestChaos runs the short schedule: one seed,
// the five ownership faults, part of the normal suite.
const (
	chaosLong          = false
	chaosDefaultFaults = 5
	chaosDefaultSeed   = 7
)
