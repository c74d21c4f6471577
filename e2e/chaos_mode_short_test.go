//go:build !chaos

package e2e

// Without the chaos build tag TestChaos runs the short schedule: one seed,
// a few faults, part of the normal suite.
const (
	chaosLong          = false
	chaosDefaultFaults = 4
	chaosDefaultSeed   = 7
)
