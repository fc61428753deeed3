package replicagrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/replica"
)

// The replica fetch answer, both ends, without copying the records more
// than the socket needs. The leader reads each partition into a buffer of
// bufpool.Shared (the replica manager's Config.ReadBuffers) and hands gRPC
// that very buffer (Answer.encode), which gives it back once the records
// are on the wire; the follower copies the answer out of gRPC's frames
// once, into a pooled buffer its records alias until they are appended
// (decodeReplicaFetch), where proto would copy the message to one buffer
// and the records again to fresh memory. Every field but the records goes
// through proto as usual, so the codec cannot drift from replica.proto.

var (
	replicaFetchPartitions = fieldNumber(&pb.ReplicaFetchResponse{}, "partitions")
	replicaFetchSession    = fieldNumber(&pb.ReplicaFetchResponse{}, "session")
	replicaFetchRecords    = fieldNumber(&pb.ReplicaFetchPartitionResult{}, "records")
)

func fieldNumber(m protobuf.Message, name string) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if f == nil {
		panic("replicagrpc: " + string(m.ProtoReflect().Descriptor().FullName()) + " has no field " + name)
	}
	return f.Number()
}

// inlineReplicaRecords: records sections smaller than this are copied
// into the encoding rather than referenced.
const inlineReplicaRecords = 4 << 10

// Answer is a leader's answer to a replica fetch as sent: the message and,
// by partition, the read buffer its records lie in, which Encode hands to
// gRPC. The broker's server codec encodes it with Encode; the unary
// handler returns it through WithPooledFetch.
type Answer struct {
	msg  *pb.ReplicaFetchResponse
	bufs []*[]byte
}

// Answer converts resp into the answer sent, taking its read buffers
// (resp's records then belong to the answer).
func (c *Codec) Answer(resp *replica.FetchResponse) *Answer {
	a := &Answer{msg: c.ResponseToPB(resp), bufs: make([]*[]byte, len(resp.Partitions))}
	for i := range resp.Partitions {
		a.bufs[i], resp.Partitions[i].Buffer = resp.Partitions[i].Buffer, nil
	}
	return a
}

// Msg is the answer's message; its records lie in the answer's buffers.
func (a *Answer) Msg() *pb.ReplicaFetchResponse { return a.msg }

// Release gives back the buffers of an answer not sent.
func (a *Answer) Release() {
	for i, b := range a.bufs {
		if b != nil {
			bufpool.Shared.Put(b)
			a.bufs[i] = nil
		}
	}
}

// unaryHold carries the answers of a ReplicaFetch call from the service
// method to the handler around it (WithPooledFetch), through the context:
// every one the method gave Unary, as an interceptor may call the method
// more than once and answer any of their messages.
type unaryHold struct{ answers []*Answer }

type unaryHoldKey struct{}

// Unary returns a's message for a ReplicaFetch service method to return.
// Under WithPooledFetch's handler, a itself is sent in its place, the
// records from the read buffers; without it, the buffers stay with the
// records, for the garbage collector.
func Unary(ctx context.Context, a *Answer) *pb.ReplicaFetchResponse {
	if hold, ok := ctx.Value(unaryHoldKey{}).(*unaryHold); ok {
		hold.answers = append(hold.answers, a)
	}
	return a.msg
}

// WithPooledFetch returns sd (quire.internal.v1.ReplicaService) with the
// ReplicaFetch handler answering the Answer its method gave Unary, which
// the server's codec encodes with Encode, referencing the read buffers;
// gRPC gives them back once the answer is written. The interceptors still
// see the method's message, whose records lie in those buffers: none may
// keep it past the call. If the call fails, or an interceptor answers
// with another message, the buffers go back at once, and so do those of
// the answers not sent when an interceptor called the method more than
// once.
func WithPooledFetch(sd *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *sd
	out.Methods = append([]grpc.MethodDesc(nil), sd.Methods...)
	for i := range out.Methods {
		if out.Methods[i].MethodName != "ReplicaFetch" {
			continue
		}
		h := out.Methods[i].Handler
		out.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			hold := &unaryHold{}
			resp, err := h(srv, context.WithValue(ctx, unaryHoldKey{}, hold), dec, in)
			var sent *Answer
			if m, ok := resp.(*pb.ReplicaFetchResponse); ok && m != nil && err == nil {
				for _, a := range hold.answers {
					if a.msg == m {
						sent = a
					}
				}
			}
			for _, a := range hold.answers {
				if a != sent {
					a.Release()
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

// Encode encodes the answer as proto.Marshal would its message (up to
// field order, which any parser accepts), every partition's records
// referenced through its buffer, which gRPC then owns.
func (a *Answer) Encode() (mem.BufferSlice, error) {
	var data mem.BufferSlice
	var meta []byte
	for i, pr := range a.msg.Partitions {
		rec := pr.Records
		pr.Records = nil
		body, err := protobuf.Marshal(pr)
		pr.Records = rec
		if err != nil {
			return nil, err
		}
		n := len(body)
		if len(rec) > 0 {
			n += protowire.SizeTag(replicaFetchRecords) + protowire.SizeBytes(len(rec))
		}
		meta = protowire.AppendTag(meta, replicaFetchPartitions, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(n))
		meta = append(meta, body...)
		var buf *[]byte
		if i < len(a.bufs) {
			buf, a.bufs[i] = a.bufs[i], nil
		}
		if len(rec) == 0 {
			if buf != nil {
				bufpool.Shared.Put(buf)
			}
			continue
		}
		meta = protowire.AppendTag(meta, replicaFetchRecords, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(len(rec)))
		pooled := buf != nil && len(*buf) == len(rec) && &(*buf)[0] == &rec[0]
		if len(rec) < inlineReplicaRecords {
			meta = append(meta, rec...)
			if pooled {
				bufpool.Shared.Put(buf)
			}
			continue
		}
		data = append(data, mem.SliceBuffer(meta))
		meta = nil
		if pooled {
			data = append(data, mem.NewBuffer(buf, bufpool.Shared))
		} else {
			// Not the buffer it was read into (nothing should make it
			// so): sent as it is, and the buffer, which may still hold
			// the records, left to the garbage collector.
			data = append(data, mem.SliceBuffer(rec))
		}
	}
	if a.msg.Session {
		meta = protowire.AppendTag(meta, replicaFetchSession, protowire.VarintType)
		meta = protowire.AppendVarint(meta, 1)
	}
	if len(meta) > 0 {
		data = append(data, mem.SliceBuffer(meta))
	}
	return data, nil
}

// pooledAnswer is what a follower receives a replica fetch answer into
// (peerCodec knows it): the message, its records aliasing buf.
type pooledAnswer struct {
	msg pb.ReplicaFetchResponse
	buf *[]byte
}

// release gives back the buffer; the records are then invalid.
func (a *pooledAnswer) release() {
	if a.buf != nil {
		bufpool.Shared.Put(a.buf)
		a.buf = nil
	}
}

func (a *pooledAnswer) unmarshal(data mem.BufferSlice) error {
	a.release()
	buf := bufpool.Shared.Get(data.Len())
	data.CopyTo(*buf)
	if decodeReplicaFetch(*buf, &a.msg) {
		a.buf = buf
		return nil
	}
	// proto copies what it keeps.
	err := protobuf.Unmarshal(*buf, &a.msg)
	bufpool.Shared.Put(buf)
	return err
}

// decodeReplicaFetch decodes b into resp with the records aliasing b; it
// reports false (resp then undefined) for anything proto.Unmarshal would
// refuse or that is not a ReplicaFetchResponse's partitions or session
// field: the caller then falls back to proto.
func decodeReplicaFetch(b []byte, resp *pb.ReplicaFetchResponse) bool {
	protobuf.Reset(resp)
	var rest []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		if num == replicaFetchSession && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b[n:])
			if m < 0 {
				return false
			}
			resp.Session = v != 0
			b = b[n+m:]
			continue
		}
		if num != replicaFetchPartitions || typ != protowire.BytesType {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		pr := &pb.ReplicaFetchPartitionResult{}
		var ok bool
		if rest, ok = decodeReplicaFetchPartition(v, pr, rest[:0]); !ok {
			return false
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return true
}

// decodeReplicaFetchPartition decodes b into pr: the records field
// aliasing b, every other field (copied into scratch) by proto.
func decodeReplicaFetchPartition(b []byte, pr *pb.ReplicaFetchPartitionResult, scratch []byte) ([]byte, bool) {
	var records []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return scratch, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return scratch, false
		}
		if num == replicaFetchRecords {
			if typ != protowire.BytesType {
				return scratch, false
			}
			records, _ = protowire.ConsumeBytes(b[n:]) // the last one, as proto
		} else {
			scratch = append(scratch, b[:n+m]...)
		}
		b = b[n+m:]
	}
	if protobuf.Unmarshal(scratch, pr) != nil {
		return scratch, false
	}
	if len(records) > 0 {
		pr.Records = records[:len(records):len(records)]
	}
	return scratch, true
}

// peerCodec is the proto codec of a follower's replica fetch call, but for
// the answer, decoded into a pooledAnswer.
type peerCodec struct{}

var peerProto = encoding.GetCodecV2(proto.Name)

func (peerCodec) Marshal(v any) (mem.BufferSlice, error) { return peerProto.Marshal(v) }

func (peerCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if a, ok := v.(*pooledAnswer); ok {
		return a.unmarshal(data)
	}
	return peerProto.Unmarshal(data, v)
}

func (peerCodec) Name() string { return proto.Name }

// Fetch sends a follower's fetch to its leader over cc, in a call of its
// own (ReplicaFetch). A fetch made while the connection is down waits
// (within ctx) for the reconnect instead of failing at once, so the first
// fetch after a network heals goes out as soon as the link is back, not
// a fetch backoff later. The answer's records alias a pooled buffer until
// the fetcher has appended them and calls Done.
func (c *Codec) Fetch(ctx context.Context, cc grpc.ClientConnInterface, req *replica.FetchRequest) (*replica.FetchResponse, error) {
	ans := &pooledAnswer{}
	err := cc.Invoke(ctx, pb.ReplicaService_ReplicaFetch_FullMethodName, RequestToPB(req), ans,
		grpc.MaxCallRecvMsgSize(c.maxAnswer), grpc.WaitForReady(true), grpc.ForceCodecV2(peerCodec{}))
	if err != nil {
		ans.release()
		return nil, err
	}
	resp := c.ResponseFromPB(&ans.msg)
	resp.Done = ans.release
	return resp, nil
}
