package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// keptTopic holds the records that must survive the sweep unchanged.
const keptTopic = "hostile-kept"

// rawCodec puts bytes on the wire as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// detail is the quire.v1.Error of a status, or nil.
func detail(err error) *quirev1.Error {
	for _, d := range status.Convert(err).Details() {
		if e, ok := d.(*quirev1.Error); ok {
			return e
		}
	}
	return nil
}

// refusal judges a whole-call refusal: an error that is not INTERNAL or
// UNKNOWN and carries a quire.v1.Error; with want, one of those codes.
func refusal(err error, want ...codes.Code) (outcome, string) {
	if err == nil {
		return fail, "answered OK where a refusal was due"
	}
	st := status.Convert(err)
	desc := fmt.Sprintf("%v: %s", st.Code(), st.Message())
	switch st.Code() {
	case codes.Internal, codes.Unknown:
		return fail, "unclear: " + desc
	}
	e := detail(err)
	if e == nil {
		return fail, "no quire.v1.Error: " + desc
	}
	desc = fmt.Sprintf("%v/%v: %s", st.Code(), e.Code, st.Message())
	if len(want) > 0 && !contains(want, st.Code()) {
		return fail, fmt.Sprintf("want %v, got %s", want, desc)
	}
	return pass, desc
}

// answer judges a call that may succeed (a value the node clamps or
// takes) or be refused clearly.
func answer(err error) (outcome, string) {
	if err == nil {
		return pass, "OK"
	}
	return refusal(err)
}

// inline judges a per-partition error in an OK response, or a clear
// refusal of the whole call.
func inline(e *quirev1.Error, err error) (outcome, string) {
	if err != nil {
		return refusal(err)
	}
	if e == nil || e.Code == quirev1.ErrorCode_NONE {
		return fail, "answered without an error where one was due"
	}
	if e.Code == quirev1.ErrorCode_UNKNOWN_SERVER_ERROR {
		return fail, "unclear: " + e.Message
	}
	return pass, fmt.Sprintf("inline %v: %s", e.Code, e.Message)
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// batch is one uncompressed record batch of n small records.
func batch(n int, prefix string) []byte {
	b := record.NewBuilder(record.None)
	ts := time.Now().UnixMilli()
	for i := range n {
		b.Append(ts, []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("%s-%d", prefix, i)), nil)
	}
	return b.Build()
}

// writeKept waits for the node's metadata.version to be finalized at the
// level it supports (a new node gets there a moment after it starts, and
// some calls answer UNSUPPORTED_VERSION before), then writes records to
// two partitions and returns what a fetch from offset 0 reads of each.
func (s *sweep) writeKept(ctx context.Context) ([][]byte, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		f, err := quirev1.NewAdminClient(s.conn).DescribeFeatures(ctx, &quirev1.DescribeFeaturesRequest{})
		if err == nil && f.MetadataVersion >= f.MaxMetadataVersion {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("metadata.version not finalized within 60s: %v %v", f, err)
		}
		time.Sleep(200 * time.Millisecond) // the node is starting
	}
	if err := s.createTopic(ctx, &quirev1.CreateTopicRequest{Name: keptTopic,
		OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 2}}); err != nil {
		return nil, err
	}
	prod := quirev1.NewProducerClient(s.conn)
	for i := range 3 {
		for p := range int32(2) {
			if err := produceOne(ctx, prod, keptTopic, p, batch(10+i, fmt.Sprintf("kept-%d-%d", p, i))); err != nil {
				return nil, err
			}
		}
	}
	return s.readKept(ctx)
}

// createTopic creates a topic (or finds it there), asking again while the
// answer is retriable: a node that has just started may not have
// registered its broker yet.
func (s *sweep) createTopic(ctx context.Context, req *quirev1.CreateTopicRequest) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := quirev1.NewAdminClient(s.conn).CreateTopic(ctx, req)
		if err == nil || status.Code(err) == codes.AlreadyExists {
			return nil
		}
		if e := detail(err); e == nil || !e.Retriable || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // the node is starting
	}
}

func produceOne(ctx context.Context, prod quirev1.ProducerClient, topic string, p int32, records []byte) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := prod.Produce(ctx, &quirev1.ProduceRequest{Partitions: []*quirev1.PartitionRecords{{Topic: topic, Partition: p, Records: records}}})
		if err != nil {
			return err
		}
		e := resp.Partitions[0].Error
		if e == nil {
			return nil
		}
		if !e.Retriable || time.Now().After(deadline) {
			return fmt.Errorf("produce %s-%d: %v: %s", topic, p, e.Code, e.Message)
		}
		time.Sleep(100 * time.Millisecond) // a new topic's leader is being elected
	}
}

func (s *sweep) readKept(ctx context.Context) ([][]byte, error) {
	cons := quirev1.NewConsumerClient(s.conn)
	resp, err := cons.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
		{Topic: keptTopic, Partition: 0, MaxBytes: 1 << 20}, {Topic: keptTopic, Partition: 1, MaxBytes: 1 << 20}}})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, p := range resp.Partitions {
		if p.Error != nil {
			return nil, fmt.Errorf("fetch %s-%d: %v: %s", p.Topic, p.Partition, p.Error.Code, p.Error.Message)
		}
		out = append(out, p.Records)
	}
	return out, nil
}

// sameRecords reads the kept partitions again and compares.
func (s *sweep) sameRecords(ctx context.Context, before [][]byte) error {
	after, err := s.readKept(ctx)
	if err != nil {
		return err
	}
	for i := range before {
		if len(before[i]) == 0 || !bytes.Equal(before[i], after[i]) {
			return fmt.Errorf("partition %d: %d bytes before, %d after, equal=%v", i, len(before[i]), len(after[i]), bytes.Equal(before[i], after[i]))
		}
	}
	return nil
}

// alive produces a record to a new topic and reads it back.
func (s *sweep) alive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	topic := fmt.Sprintf("hostile-alive-%d", time.Now().UnixNano())
	if err := s.createTopic(ctx, &quirev1.CreateTopicRequest{Name: topic}); err != nil {
		return err
	}
	if err := produceOne(ctx, quirev1.NewProducerClient(s.conn), topic, 0, batch(1, "alive")); err != nil {
		return err
	}
	resp, err := quirev1.NewConsumerClient(s.conn).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: topic, MaxWaitMs: 5000})
	if err != nil {
		return err
	}
	if len(resp.Records) != 1 || resp.Records[0].GetValue() != "alive-0" {
		return fmt.Errorf("read back %v", resp.Records)
	}
	return nil
}

// grpcMalformed sends, to every method of every quire.v1 service, bytes
// that do not parse as its request: a broken varint, a length-delimited
// field claiming more bytes than follow, and (where the request has a
// string field) that field holding bytes that are not UTF-8. Each must
// be INVALID_ARGUMENT with a quire.v1.Error.
func (s *sweep) grpcMalformed(ctx context.Context) {
	var methods []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("quire.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				methods = append(methods, sd.Methods().Get(j))
			}
		}
		return true
	})
	for _, md := range methods {
		name := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
		bodies := []struct {
			what string
			b    []byte
		}{
			{"broken varint", bytes.Repeat([]byte{0xff}, 11)},
			{"truncated field", []byte{0x7a, 0x40, 'a', 'b', 'c'}}, // field 15, 64 bytes claimed
		}
		if f := firstString(md.Input()); f != nil {
			b := protowire.AppendTag(nil, f.Number(), protowire.BytesType)
			bodies = append(bodies, struct {
				what string
				b    []byte
			}{"non-UTF-8 " + string(f.Name()), protowire.AppendString(b, "ok\xff\xfe")})
		}
		if name == "/quire.v1.Groups/Subscribe" {
			// SubscribeRequest.start.group, not UTF-8.
			start := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "g\xff")
			b := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), start)
			bodies = append(bodies, struct {
				what string
				b    []byte
			}{"non-UTF-8 start.group", b})
		}
		for _, body := range bodies {
			err := s.sendRaw(ctx, md, name, body.b)
			o, d := refusal(err, codes.InvalidArgument)
			s.report(fmt.Sprintf("grpc %s: %s", strings.TrimPrefix(name, "/quire.v1."), body.what), o, d)
		}
	}
}

// firstString is a top-level string field of m, if any.
func firstString(m protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	for i := range m.Fields().Len() {
		if f := m.Fields().Get(i); f.Kind() == protoreflect.StringKind {
			return f
		}
	}
	return nil
}

// sendRaw sends body as the request of md and returns the call's error.
func (s *sweep) sendRaw(ctx context.Context, md protoreflect.MethodDescriptor, name string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	in := body
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		var out []byte
		return s.conn.Invoke(ctx, name, &in, &out, grpc.ForceCodec(rawCodec{}))
	}
	desc := &grpc.StreamDesc{ClientStreams: md.IsStreamingClient(), ServerStreams: md.IsStreamingServer()}
	cs, err := s.conn.NewStream(ctx, desc, name, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&in); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = cs.CloseSend()
	var out []byte
	err = cs.RecvMsg(&out)
	if errors.Is(err, io.EOF) {
		return nil // ended without a status: OK
	}
	return err
}
