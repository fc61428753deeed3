package service

import (
	"sync"

	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
)

// A ProduceStream request is copied out of gRPC's buffers into a buffer
// from produceBufs rather than a fresh one: a fresh megabyte costs its
// zeroing and page faults on every request, several times the copy
// itself. The records alias the buffer (wire.DecodeProduceRequest) until they
// are appended; the log writes them out and keeps no reference, so the
// handler hands the buffer back right after the core's Append.

// pooledProduce is what ProduceStream receives into (serverCodec knows
// it): the request and the buffer its records alias.
type pooledProduce struct {
	req quirev1.ProduceRequest
	buf *[]byte
}

var produceBufs sync.Pool // of *[]byte

func getProduceBuf(n int) *[]byte {
	if p, _ := produceBufs.Get().(*[]byte); p != nil && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, max(n, 1<<20))
	return &b
}

// release returns the buffer; the request's records are then invalid.
func (m *pooledProduce) release() {
	if m.buf != nil {
		produceBufs.Put(m.buf)
		m.buf = nil
	}
}

// unmarshal decodes data into m.
func (m *pooledProduce) unmarshal(data mem.BufferSlice) error {
	m.release()
	buf := getProduceBuf(data.Len())
	data.CopyTo(*buf)
	if wire.DecodeProduceRequest(*buf, &m.req) {
		m.buf = buf
		return nil
	}
	// proto copies what it keeps, so the buffer can go back at once.
	err := protobuf.Unmarshal(*buf, &m.req)
	produceBufs.Put(buf)
	return err
}

// ProduceRequestOf is the produce request m holds: a ProduceStream
// message as the server codec received it, or a ProduceRequest.
func ProduceRequestOf(m any) (*quirev1.ProduceRequest, bool) {
	switch m := m.(type) {
	case *pooledProduce:
		return &m.req, true
	case *quirev1.ProduceRequest:
		return m, true
	}
	return nil, false
}
