//go:build !race

package testdepth

const raceEnabled = false
