//go:build !unix

package dirlock

import "os"

// tryLock: without flock the directory is not protected; the pid is still
// recorded.
func tryLock(*os.File) (bool, error) { return false, nil }

func unlock(*os.File) error { return nil }
