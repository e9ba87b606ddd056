//go:build race

package chaostest

// raceOn reports that this binary runs under the race detector.
const raceOn = true
