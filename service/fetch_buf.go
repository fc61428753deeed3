package service

import (
	"google.golang.org/grpc/mem"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/fetchbuf"
)

// Fetches read into buffers from internal/fetchbuf and hand them to
// gRPC with the records, which gives them back once they are sent.

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
	return mem.NewBuffer(m.bufs[i], fetchbuf.Pool{})
}

// Inlined returns the buffer of partition i when its records were copied.
func (m *pooledFetch) Inlined(i int) {
	if i < len(m.bufs) && m.bufs[i] != nil {
		fetchbuf.Put(m.bufs[i])
		m.bufs[i] = nil
	}
}
