//go:build !linux

package storage

import "errors"

// reserveSpace is Linux's fallocate elsewhere; here nothing is reserved.
func reserveSpace(File, int64, int64) error { return errors.ErrUnsupported }
