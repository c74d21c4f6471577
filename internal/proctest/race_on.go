//go:build race

package proctest

// raceEnabled: this binary was built with -race (a test run with it).
const raceEnabled = true
