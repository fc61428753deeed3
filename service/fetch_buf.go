package service

import (
	"context"

	"google.golang.org/grpc"
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

// Buffer is the gRPC buffer of partition i's records (wire.RecordsBuffers),
// which then owns the pooled buffer. Records other than the whole of
// partition i's buffer (the response changed since the read) are sent as
// they are, and the buffer, which they may lie in, is left to the
// garbage collector.
func (m *pooledFetch) Buffer(i int, records []byte) mem.Buffer {
	if i >= len(m.bufs) || m.bufs[i] == nil {
		return mem.SliceBuffer(records)
	}
	buf := m.bufs[i]
	m.bufs[i] = nil
	if len(*buf) != len(records) || len(records) == 0 || &(*buf)[0] != &records[0] {
		return mem.SliceBuffer(records)
	}
	return mem.NewBuffer(buf, fetchbuf.Pool{})
}

// Inlined returns the buffer of partition i when its records were copied.
func (m *pooledFetch) Inlined(i int) {
	if i < len(m.bufs) && m.bufs[i] != nil {
		fetchbuf.Put(m.bufs[i])
		m.bufs[i] = nil
	}
}

// fetchHold carries the pooledFetch of a unary Fetch from the service
// method to the handler around it (withPooledFetch), through the context:
// every one the method left, as an interceptor may call the method more
// than once and answer any of its messages.
type fetchHold struct{ msgs []*pooledFetch }

type fetchHoldKey struct{}

// keep leaves msg with the call, for withPooledFetch's handler to send or
// give back.
func (h *fetchHold) keep(msg *pooledFetch) { h.msgs = append(h.msgs, msg) }

// unaryFetchHold is the hold of a Fetch call under withPooledFetch's
// handler, or nil: then its reads go into buffers of their own, which
// stay with the records for the garbage collector.
func unaryFetchHold(ctx context.Context) *fetchHold {
	h, _ := ctx.Value(fetchHoldKey{}).(*fetchHold)
	return h
}

// withPooledFetch returns sd (quire.v1.Consumer) with the Fetch handler
// answering the pooledFetch its method left in the hold, which
// serverCodec encodes with the records referenced in their pooled read
// buffers; gRPC gives them back once the answer is written. The
// interceptors still see the method's FetchResponse, whose records lie
// in those buffers: none may keep it past the call. If the call fails,
// or an interceptor answers with another message, the buffers go back at
// once, and so do those of the messages not answered when an interceptor
// called the method more than once.
func withPooledFetch(sd *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *sd
	out.Methods = append([]grpc.MethodDesc(nil), sd.Methods...)
	for i := range out.Methods {
		if out.Methods[i].MethodName != "Fetch" {
			continue
		}
		h := out.Methods[i].Handler
		out.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			hold := &fetchHold{}
			resp, err := h(srv, context.WithValue(ctx, fetchHoldKey{}, hold), dec, in)
			var sent *pooledFetch
			if m, ok := resp.(*quirev1.FetchResponse); ok && m != nil && err == nil {
				for _, msg := range hold.msgs {
					if msg.resp == m {
						sent = msg
					}
				}
			}
			for _, msg := range hold.msgs {
				if msg != sent {
					msg.release()
				}
			}
			if sent == nil {
				return resp, err
			}
			return sent, nil
		}
	}
	return &out
}

// release gives back the buffers of a message not sent.
func (m *pooledFetch) release() {
	for i, b := range m.bufs {
		if b != nil {
			fetchbuf.Put(b)
			m.bufs[i] = nil
		}
	}
}
