//go:build race

package main

// raceEnabled: the test binary was built with -race, so the pod is too
// (sharing the race-instrumented build cache, and checking the pod).
const raceEnabled = true
