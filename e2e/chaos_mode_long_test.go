//go:build chaos

package e2e

// With -tags chaos TestChaos runs -chaos.runs seeded runs (the seed of run i
// is -chaos.seed + i; -chaos.seed 0 draws a fresh one) of -chaos.faults
// faults each (default: every kind once, in a seeded order).
const (
	chaosLong          = true
	chaosDefaultFaults = 13
	chaosDefaultSeed   = 0
)
