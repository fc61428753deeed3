package broker

import (
	"google.golang.org/grpc/mem"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/fetchbuf"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// Fetches read into buffers from internal/fetchbuf and hand them to
// gRPC with the records, which gives them back once they are sent.

// releaseFetchBufs returns the buffers of results that are not sent.
func releaseFetchBufs(results []fetchResult) {
	for i := range results {
		if results[i].buf != nil {
			fetchbuf.Put(results[i].buf)
			results[i].buf, results[i].batches = nil, nil
		}
	}
}

// readPooled is Partition.Read into a buffer from internal/fetchbuf. buf is nil
// when the batches are not in it (nothing read, or a batch too big for
// it: then they are in a buffer of their own).
func readPooled(p *replica.Partition, offset int64, maxBytes int) (res storage.ReadResult, hw int64, buf *[]byte, err error) {
	buf = fetchbuf.Get(maxBytes)
	res, hw, err = p.ReadAppend(*buf, offset, maxBytes)
	if err != nil || len(res.Batches) == 0 || cap(res.Batches) != cap(*buf) || &res.Batches[:1][0] != &(*buf)[:1][0] {
		fetchbuf.Put(buf)
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
	return mem.NewBuffer(m.bufs[i], fetchbuf.Pool{})
}

// Inlined returns the buffer of partition i when its records were copied.
func (m *pooledFetch) Inlined(i int) {
	if i < len(m.bufs) && m.bufs[i] != nil {
		fetchbuf.Put(m.bufs[i])
		m.bufs[i] = nil
	}
}
