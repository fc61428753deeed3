// Package nullbroker is a broker that does as little as it can: one topic
// of one partition, produced batches split and counted (so their framing
// is checked, as any broker must) but not kept, and fetches served from one
// pre-built chunk of batches. Measured against it, a client shows its own
// cost; pre-built requests sent to it with no client at all show the gRPC
// transport's ceiling (`quire perf ceiling`, the client benchmarks).
package nullbroker

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// MaxMessageBytes is the server's gRPC send and receive limit.
const MaxMessageBytes = 64 << 20

// Server is a null broker serving one topic of one partition.
type Server struct {
	quirev1.UnimplementedMetadataServer
	quirev1.UnimplementedProducerServer
	quirev1.UnimplementedConsumerServer

	addr  string
	topic string
	next  atomic.Int64 // produce offsets
	chunk []byte       // batches served by Fetch, base offsets from 0
	recs  int64        // records in chunk
	grpc  *grpc.Server
	lis   net.Listener
}

// Start serves a null broker for topic on lis, answering metadata with
// lis's address; fetches return about 4 MiB of 1000-record batches of
// value.
func Start(lis net.Listener, topic string, value []byte) *Server {
	s := &Server{addr: lis.Addr().String(), topic: topic, lis: lis}
	bld := record.NewBuilder(record.None)
	ts := time.Now().UnixMilli()
	for len(s.chunk) < 4<<20-200<<10 {
		bld.Reset()
		for range 1000 {
			bld.Append(ts, nil, value, nil)
		}
		batch := bld.Build()
		record.SetBaseOffset(batch, s.recs)
		s.chunk = append(s.chunk, batch...)
		s.recs += 1000
	}
	// The broker's own transport settings (broker.transportOptions):
	// flow-control windows and buffers sized for megabyte messages, so
	// the ceiling is the transport's, not gRPC's defaults'.
	s.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.InitialWindowSize(4<<20), grpc.InitialConnWindowSize(16<<20),
		grpc.ReadBufferSize(256<<10), grpc.WriteBufferSize(256<<10))
	quirev1.RegisterMetadataServer(s.grpc, s)
	quirev1.RegisterProducerServer(s.grpc, s)
	quirev1.RegisterConsumerServer(s.grpc, s)
	go func() { _ = s.grpc.Serve(lis) }()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Stop closes the listener and every connection.
func (s *Server) Stop() { s.grpc.Stop() }

// GetMetadata answers the one topic, led by this server as broker 1.
func (s *Server) GetMetadata(context.Context, *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	return &quirev1.GetMetadataResponse{ClusterId: "null", ControllerId: 1,
		Brokers: []*quirev1.Broker{{Id: 1, Address: s.addr}},
		Topics: []*quirev1.TopicMetadata{{Name: s.topic, TopicId: "null",
			Partitions: []*quirev1.PartitionMetadata{{Partition: 0, Leader: 1, Replicas: []int32{1}, Isr: []int32{1}}}}},
	}, nil
}

// ProduceStream splits each request's batches, checking their framing,
// and answers offsets as if it had appended them.
func (s *Server) ProduceStream(stream quirev1.Producer_ProduceStreamServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &quirev1.ProduceResponse{CorrelationId: req.CorrelationId}
		for _, p := range req.Partitions {
			var n int64
			err := record.SplitBatches(p.Records, func(_ []byte, h record.Header) error { n += int64(h.NumRecords); return nil })
			res := &quirev1.PartitionProduceResult{Topic: p.Topic, Partition: p.Partition, BaseOffset: s.next.Add(n) - n}
			if err != nil {
				res.Error = &quirev1.Error{Code: quirev1.ErrorCode_CORRUPT_MESSAGE, Message: err.Error()}
			}
			resp.Partitions = append(resp.Partitions, res)
		}
		if req.GetAcks() != 0 {
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// ListOffsets answers 0 for every partition.
func (s *Server) ListOffsets(_ context.Context, req *quirev1.ListOffsetsRequest) (*quirev1.ListOffsetsResponse, error) {
	resp := &quirev1.ListOffsetsResponse{}
	for _, p := range req.Partitions {
		resp.Partitions = append(resp.Partitions, &quirev1.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: 0})
	}
	return resp, nil
}

// Fetch answers with the chunk, its base offsets moved to the requested
// offset (a copy: the base offset is outside the CRC).
func (s *Server) Fetch(_ context.Context, req *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	p := req.Partitions[0]
	data := append([]byte(nil), s.chunk...)
	_ = record.SplitBatches(data, func(batch []byte, h record.Header) error {
		record.SetBaseOffset(batch, p.Offset+h.BaseOffset)
		return nil
	})
	return &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{{Topic: p.Topic, Partition: p.Partition,
		HighWatermark: p.Offset + s.recs, Records: data}}}, nil
}
