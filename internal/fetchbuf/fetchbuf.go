// Package fetchbuf is the pool of buffers fetches read partitions into.
//
// A fetch reads each partition into a buffer from this pool rather than a
// fresh one (a fresh megabyte costs its zeroing and page faults on every
// read, more than the read itself), and hands the buffer to gRPC with the
// records (mem.NewBuffer with Pool): gRPC returns it here once the records
// are on the wire, never before.
package fetchbuf

import "sync"

var pool sync.Pool // of *[]byte

// Size is a buffer's size at least: the default partition fetch size.
const Size = 1 << 20

// Get returns an empty buffer with room for n bytes.
func Get(n int) *[]byte {
	if p, _ := pool.Get().(*[]byte); p != nil && cap(*p) >= n {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, max(n, Size))
	return &b
}

// Put gives p back; nothing may use it afterwards.
func Put(p *[]byte) { pool.Put(p) }

// Pool is the mem.BufferPool gRPC returns the buffers to.
type Pool struct{}

// Get is not used by gRPC for buffers it is handed.
func (Pool) Get(n int) *[]byte { b := make([]byte, n); return &b }

// Put gives p back to the pool.
func (Pool) Put(p *[]byte) { pool.Put(p) }
