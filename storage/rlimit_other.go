//go:build !unix

package storage

// openFileLimit is unknown where there is no RLIMIT_NOFILE.
func openFileLimit() (uint64, bool) { return 0, false }
