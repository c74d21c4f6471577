//go:build !race

package proctest

// raceEnabled: this binary was built without -race.
const raceEnabled = false
