//go:build !race

package gateway_test

// raceEnabled: this test binary was built with -race.
const raceEnabled = false
