package request_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// reassigner records the reassignments the core passes on.
type reassigner struct {
	mu     sync.Mutex
	calls  [][]metadata.Reassignment
	minISR []map[string]int32
}

func (r *reassigner) ReassignPartitions(_ context.Context, rs []metadata.Reassignment, minISR map[string]int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, rs)
	r.minISR = append(r.minISR, minISR)
	return nil
}
func (r *reassigner) CordonBroker(context.Context, int32, bool) error { return nil }
func (r *reassigner) SetReassignmentThrottle(context.Context, []int32, int64, bool) error {
	return nil
}

// Bad requests are refused whole, before anything reaches the
// controller; a good one goes with the topic's effective
// min.insync.replicas.
func TestCoreReassignRefusedWhole(t *testing.T) {
	t.Parallel()
	ra := &reassigner{}
	f := newCore(t, func(c *request.Config) {
		c.Admin = request.AdminConfig{Reassigner: ra, TopicConfigs: func(map[string]string) []request.ConfigEntry {
			return []request.ConfigEntry{{Name: "retention.ms", Value: "1"}, {Name: "min.insync.replicas", Value: "2"}}
		}}
	})
	ctx := ctxT(t)
	good := metadata.Reassignment{Topic: "t", Partition: 1, Replicas: []int32{2, 3}}
	for name, tc := range map[string]struct {
		bad  metadata.Reassignment
		want error
	}{
		"unknown topic":        {metadata.Reassignment{Topic: "nope", Replicas: []int32{1, 2}}, metadata.ErrUnknownTopic},
		"unknown partition":    {metadata.Reassignment{Topic: "t", Partition: 9, Replicas: []int32{1, 2}}, metadata.ErrUnknownTopic},
		"unknown broker":       {metadata.Reassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 7}}, metadata.ErrInvalidReassignment},
		"broker twice":         {metadata.Reassignment{Topic: "t", Partition: 0, Replicas: []int32{2, 2}}, metadata.ErrInvalidReassignment},
		"below min.insync":     {metadata.Reassignment{Topic: "t", Partition: 0, Replicas: []int32{2}}, metadata.ErrInvalidReassignment},
		"no replicas":          {metadata.Reassignment{Topic: "t", Partition: 0}, metadata.ErrInvalidReassignment},
		"cancel with some":     {metadata.Reassignment{Topic: "t", Partition: 0, Cancel: true, Replicas: []int32{1}}, metadata.ErrInvalidReassignment},
		"cancel of nothing":    {metadata.Reassignment{Topic: "t", Partition: 0, Cancel: true}, metadata.ErrNoReassignmentInProgress},
		"same partition twice": {metadata.Reassignment{Topic: "t", Partition: 1, Replicas: []int32{1, 3}}, metadata.ErrInvalidReassignment},
	} {
		err := f.core.AlterPartitionReassignments(ctx, []metadata.Reassignment{good, tc.bad})
		var e *request.Error
		if !errors.Is(err, tc.want) || !errors.As(err, &e) {
			t.Errorf("%s: %v, want %v as a *request.Error", name, err, tc.want)
		}
	}
	if err := f.core.AlterPartitionReassignments(ctx, nil); !errors.Is(err, replica.ErrInvalidRequest) {
		t.Errorf("no partitions: %v", err)
	}
	if len(ra.calls) != 0 {
		t.Fatalf("refused requests reached the controller: %v", ra.calls)
	}
	if err := f.core.AlterPartitionReassignments(ctx, []metadata.Reassignment{good}); err != nil {
		t.Fatal(err)
	}
	if len(ra.calls) != 1 || !slices.Equal(ra.calls[0][0].Replicas, good.Replicas) || ra.minISR[0]["t"] != 2 {
		t.Fatalf("passed on %v with %v", ra.calls, ra.minISR)
	}
	if _, err := f.core.ListPartitionReassignments(ctx, []request.PartitionsOf{{Topic: "nope"}}); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("list of an unknown topic: %v", err)
	}
	if got, err := f.core.ListPartitionReassignments(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("list: %v %v", got, err)
	}
	if err := f.core.CordonBroker(ctx, 9, true); !errors.Is(err, metadata.ErrUnknownBroker) {
		t.Fatalf("cordon of an unknown broker: %v", err)
	}
	if err := f.core.SetReassignmentThrottle(ctx, nil, -1, false); !errors.Is(err, replica.ErrInvalidRequest) {
		t.Fatalf("a negative throttle: %v", err)
	}
}
