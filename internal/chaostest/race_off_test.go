//go:build !race

package chaostest

const raceOn = false
