package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/txn"
)

// Transaction markers between brokers: the controller's transaction
// coordinator has the request core write them (markerWriter), which
// passes those of partitions led elsewhere to their leaders over
// ReplicaService.WriteTxnMarkers (coreForwarder), which this broker
// serves for its own partitions (replicaService).

// WriteTxnMarkers asks leader to append markers to the partitions it
// leads.
func (f coreForwarder) WriteTxnMarkers(ctx context.Context, leader int32, markers []request.TxnMarker) ([][]error, error) {
	cc, _, err := f.conn(leader)
	if err != nil {
		return nil, err
	}
	in := &pb.WriteTxnMarkersRequest{Markers: make([]*pb.TxnMarker, len(markers))}
	for i, m := range markers {
		tm := &pb.TxnMarker{ProducerId: m.ProducerID, ProducerEpoch: int32(m.ProducerEpoch), Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
		for _, p := range m.Partitions {
			tm.Partitions = append(tm.Partitions, &pb.LogPartitionRef{Topic: p.Topic, Partition: p.Partition})
		}
		in.Markers[i] = tm
	}
	resp, err := pb.NewReplicaServiceClient(cc).WriteTxnMarkers(f.b.forwardContext(ctx), in)
	if err != nil {
		return nil, err
	}
	out := make([][]error, len(resp.Markers))
	for i, m := range resp.Markers {
		out[i] = make([]error, len(m.Partitions))
		for j, p := range m.Partitions {
			out[i][j] = service.FromError(p.Error)
		}
	}
	return out, nil
}

// WriteTxnMarkers appends markers to the partitions this broker leads.
func (s *replicaService) WriteTxnMarkers(ctx context.Context, req *pb.WriteTxnMarkersRequest) (*pb.WriteTxnMarkersResponse, error) {
	markers := make([]request.TxnMarker, len(req.Markers))
	for i, m := range req.Markers {
		tm := request.TxnMarker{ProducerID: m.ProducerId, ProducerEpoch: int16(m.ProducerEpoch), Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
		for _, p := range m.Partitions {
			tm.Partitions = append(tm.Partitions, txn.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
		markers[i] = tm
	}
	got := s.b.core.WriteMarkers(ctx, markers, true)
	resp := &pb.WriteTxnMarkersResponse{Markers: make([]*pb.TxnMarkerResult, len(got))}
	for i, errs := range got {
		r := &pb.TxnMarkerResult{}
		for j, err := range errs {
			p := markers[i].Partitions[j]
			r.Partitions = append(r.Partitions, &pb.TxnMarkerPartition{Topic: p.Topic, Partition: p.Partition, Error: service.ErrorOf(err)})
		}
		resp.Markers[i] = r
	}
	return resp, nil
}

// markerWriter is the transaction coordinator's txncoord.MarkerWriter
// over this node's request core, which is built after the metadata node
// (and so after the coordinator) and set here then.
type markerWriter struct {
	c    *cluster
	core atomic.Pointer[request.Core]
}

// errNoCore: the coordinator ran before the node's request core was
// built (it is retried).
var errNoCore = errors.New("broker: the request core is not ready")

func (w *markerWriter) WriteMarkers(ctx context.Context, m txn.Marker) error {
	core := w.core.Load()
	if core == nil {
		return errNoCore
	}
	got := core.WriteMarkers(ctx, []request.TxnMarker{{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit,
		CoordinatorEpoch: m.CoordinatorEpoch, Partitions: m.Partitions}}, false)
	var errs []error
	for j, err := range got[0] {
		if err == nil {
			continue
		}
		p := m.Partitions[j]
		// A partition deleted since it joined the transaction has no
		// reader left to keep waiting.
		if t, ok := w.c.image().Topic(p.Topic); !ok || int(p.Partition) >= len(t.Partitions) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, err))
	}
	return errors.Join(errs...)
}
