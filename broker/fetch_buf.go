package broker

import (
	"sync"

	"google.golang.org/grpc/mem"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// A FetchStream reads each partition into a buffer from fetchBufs rather
// than a fresh one (a fresh megabyte costs its zeroing and page faults on
// every read, more than the read itself), and hands the buffer to gRPC
// with the records (mem.NewBuffer): gRPC returns it to the pool once the
// records are on the wire, never before.

var fetchBufs sync.Pool // of *[]byte

const fetchBufSize = 1 << 20 // the default partition fetch size

func getFetchBuf(n int) *[]byte {
	if p, _ := fetchBufs.Get().(*[]byte); p != nil && cap(*p) >= n {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, max(n, fetchBufSize))
	return &b
}

// fetchBufPool is the mem.BufferPool gRPC returns the buffers to.
type fetchBufPool struct{}

func (fetchBufPool) Get(n int) *[]byte { b := make([]byte, n); return &b } // unused by gRPC here
func (fetchBufPool) Put(p *[]byte)     { fetchBufs.Put(p) }

// releaseFetchBufs returns the buffers of results that are not sent.
func releaseFetchBufs(results []fetchResult) {
	for i := range results {
		if results[i].buf != nil {
			fetchBufs.Put(results[i].buf)
			results[i].buf, results[i].batches = nil, nil
		}
	}
}

// readPooled is Partition.Read into a buffer from fetchBufs. buf is nil
// when the batches are not in it (nothing read, or a batch too big for
// it: then they are in a buffer of their own).
func readPooled(p *replica.Partition, offset int64, maxBytes int) (res storage.ReadResult, hw int64, buf *[]byte, err error) {
	buf = getFetchBuf(maxBytes)
	res, hw, err = p.ReadAppend(*buf, offset, maxBytes)
	if err != nil || len(res.Batches) == 0 || cap(res.Batches) != cap(*buf) || &res.Batches[:1][0] != &(*buf)[:1][0] {
		fetchBufs.Put(buf)
		buf = nil
	}
	if err != nil {
		return res, hw, nil, err
	}
	if buf != nil {
		*buf = res.Batches
	}
	return res, hw, buf, nil
}

// pooledFetch is what FetchStream sends (serverCodec knows it): the
// response and the pooled buffers its records are in, by partition.
type pooledFetch struct {
	resp *quirev1.FetchResponse
	bufs []*[]byte
}

// Buffer is the gRPC buffer of partition i's records (wire.RecordsBuffers).
func (m *pooledFetch) Buffer(i int, records []byte) mem.Buffer {
	if i >= len(m.bufs) || m.bufs[i] == nil {
		return mem.SliceBuffer(records)
	}
	return mem.NewBuffer(m.bufs[i], fetchBufPool{})
}

// Inlined returns the buffer of partition i when its records were copied.
func (m *pooledFetch) Inlined(i int) {
	if i < len(m.bufs) && m.bufs[i] != nil {
		fetchBufs.Put(m.bufs[i])
		m.bufs[i] = nil
	}
}
