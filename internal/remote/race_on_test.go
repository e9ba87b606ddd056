//go:build race

package remote

// raceOn reports a race build: timing bounds loosen under its cost.
const raceOn = true
