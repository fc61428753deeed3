// Package bufpool is the gRPC buffer pool (mem.BufferPool) of the broker's
// listeners and node-to-node connections and of the Go client's: the
// buffers gRPC reads each HTTP/2 data frame into, and marshals messages
// into, kept in power-of-two size classes for reuse. Unlike gRPC's default
// pool it does not zero a buffer it hands out again: gRPC writes every
// buffer it takes before reading it (a frame is read in whole, a message
// marshalled in whole), and zeroing them cost a pass over every byte
// received (a 16 KiB clear per data frame), a share of a broker's CPU
// per record comparable to checking the batch's CRC.
package bufpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// The size classes: 1<<minShift (smaller buffers are not pooled) to
// 1<<maxShift (larger ones are allocated and dropped).
const (
	minShift = 8
	maxShift = 24
)

// Pool is a mem.BufferPool of buffers that are not zeroed between uses.
// The zero value is ready; it is safe for concurrent use.
type Pool struct {
	classes [maxShift - minShift + 1]sync.Pool // of *[]byte, cap exactly 1<<(minShift+i) when made here
}

var _ mem.BufferPool = (*Pool)(nil)

// Shared is the pool of this process.
var Shared = &Pool{}

// Get returns a buffer of length n; its contents are undefined.
func (p *Pool) Get(n int) *[]byte {
	if n > 1<<maxShift {
		b := make([]byte, n)
		return &b
	}
	shift := max(bits.Len(uint(max(n, 1)-1)), minShift)
	if b, _ := p.classes[shift-minShift].Get().(*[]byte); b != nil {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<shift)
	return &b
}

// Put takes b back for reuse (any buffer of at least 1<<minShift bytes of
// capacity, in the largest class it can serve).
func (p *Pool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minShift {
		return
	}
	shift := bits.Len(uint(c)) - 1
	if shift > maxShift {
		return
	}
	p.classes[shift-minShift].Put(b)
}
