//go:build !linux

package broker

// raiseOpenFileLimit is a no-op here: the limit is left as it is and
// reported unknown, so it does not bound the derived budget.
func raiseOpenFileLimit() (capacity, error) { return capacity{}, nil }

// memoryLimit is unknown here.
func memoryLimit() uint64 { return 0 }
