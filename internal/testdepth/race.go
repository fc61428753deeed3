//go:build race

package testdepth

const raceEnabled = true
