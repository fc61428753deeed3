package record

import (
	"os"
	"syscall"
	"testing"
)

// guardedBuf is n bytes that end where an inaccessible page begins, so
// that code reading past them crashes the test rather than reading
// whatever follows.
type guardedBuf struct {
	b   []byte
	mem []byte // the whole mapping
}

func newGuarded(t testing.TB, n int) guardedBuf {
	page := os.Getpagesize()
	size := (n+page-1)/page*page + page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	end := size - page
	return guardedBuf{b: mem[end-n : end : end], mem: mem}
}

func (g guardedBuf) release() {
	if g.mem != nil {
		_ = syscall.Munmap(g.mem)
	}
}
