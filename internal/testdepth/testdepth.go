// Package testdepth says how many rounds a randomized model test runs.
//
// Such a test drives one goroutine through many rounds of fixed seeds,
// comparing the code against a model. Under -race each round costs
// several times more and the detector has nothing to find in a single
// goroutine, so `make test`, which runs every package with -race, runs
// the quick depth; `go test` without -race runs every round. So does
// QUIRE_TEST_DEPTH=full with -race, and -short always asks for the quick
// depth (docs/testing.md).
package testdepth

import (
	"os"
	"testing"
)

// Quick reports whether a model test should run its quick depth.
func Quick() bool {
	switch os.Getenv("QUIRE_TEST_DEPTH") {
	case "full":
		return false
	case "quick":
		return true
	}
	return raceEnabled || testing.Short()
}

// Rounds answers full, or quick where Quick holds.
func Rounds(full, quick int) int {
	if Quick() {
		return quick
	}
	return full
}
