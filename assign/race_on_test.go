//go:build race

package assign

// raceEnabled: this test binary was built with -race.
const raceEnabled = true
