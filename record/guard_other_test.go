//go:build !linux

package record

import "testing"

// guardedBuf is a plain buffer here: no guard page.
type guardedBuf struct{ b []byte }

func newGuarded(_ testing.TB, n int) guardedBuf { return guardedBuf{b: make([]byte, n)} }

func (guardedBuf) release() {}
