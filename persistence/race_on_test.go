//go:build race

package persistence

// raceEnabled: this test binary was built with -race.
const raceEnabled = true
