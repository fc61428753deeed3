package request_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// reassigner records the reassignments the core passes on. As the
// controller does, it refuses a whole call when refuse refuses one of its
// partitions (the calls refused are recorded too).
type reassigner struct {
	mu     sync.Mutex
	calls  [][]metadata.Reassignment
	minISR []map[string]int32
	refuse func(metadata.Reassignment) error
}

func (r *reassigner) ReassignPartitions(_ context.Context, rs []metadata.Reassignment, minISR map[string]int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, rs)
	r.minISR = append(r.minISR, minISR)
	for _, x := range rs {
		if r.refuse == nil {
			break
		}
		if err := r.refuse(x); err != nil {
			return err
		}
	}
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

// Kafka's answer, partition by partition: the partitions refused on this
// broker's image have their own errors and the others reach the
// controller; when the controller refuses one of a batch (its image is
// ahead of this broker's), the others still go ahead, one at a time.
func TestCoreReassignEach(t *testing.T) {
	t.Parallel()
	ra := &reassigner{}
	f := newCore(t, func(c *request.Config) {
		c.Admin = request.AdminConfig{Reassigner: ra}
	})
	ctx := ctxT(t)
	good0 := metadata.Reassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 2}}
	good1 := metadata.Reassignment{Topic: "t", Partition: 1, Replicas: []int32{2, 3}}
	codeOf := func(r request.PartitionResult) int32 {
		if r.Err == nil {
			return 0
		}
		return r.Err.Code
	}
	for _, bad := range []struct {
		r    metadata.Reassignment
		code int32
		says string
	}{
		{metadata.Reassignment{Topic: "t", Partition: 0, Cancel: true}, 85, "t-0"},
		{metadata.Reassignment{Topic: "nope", Replicas: []int32{1}}, 3, "nope-0"},
		{metadata.Reassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 7}}, 39, "broker 7"},
	} {
		ra.calls = nil
		res, err := f.core.AlterPartitionReassignmentsEach(ctx, []metadata.Reassignment{bad.r, good1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 || codeOf(res[0]) != bad.code || !strings.Contains(res[0].Err.Error(), bad.says) || codeOf(res[1]) != 0 {
			t.Fatalf("%+v with t-1: %+v, want code %d saying %q, then t-1 fine", bad.r, res, bad.code, bad.says)
		}
		if len(ra.calls) != 1 || len(ra.calls[0]) != 1 || ra.calls[0][0].Partition != 1 {
			t.Fatalf("passed on %v, want t-1 alone", ra.calls)
		}
	}

	// The controller no longer has t-0 to cancel: t-1 still goes.
	ra.calls = nil
	ra.refuse = func(r metadata.Reassignment) error {
		if r.Partition == 0 {
			return fmt.Errorf("%w: t-0", metadata.ErrNoReassignmentInProgress)
		}
		return nil
	}
	res, err := f.core.AlterPartitionReassignmentsEach(ctx, []metadata.Reassignment{good0, good1})
	if err != nil {
		t.Fatal(err)
	}
	if codeOf(res[0]) != 85 || codeOf(res[1]) != 0 {
		t.Fatalf("after the controller's refusal of t-0: %+v", res)
	}
	if len(ra.calls) != 3 || len(ra.calls[0]) != 2 || len(ra.calls[1]) != 1 || len(ra.calls[2]) != 1 || ra.calls[2][0].Partition != 1 {
		t.Fatalf("calls %v: want the batch, then t-0 and t-1 alone", ra.calls)
	}

	// A refusal of the call itself is every partition's; nothing is
	// tried again.
	ra.calls = nil
	ra.refuse = func(metadata.Reassignment) error { return replica.ErrLeaderNotAvailable }
	res, err = f.core.AlterPartitionReassignmentsEach(ctx, []metadata.Reassignment{good0, good1})
	if err != nil || codeOf(res[0]) != 5 || codeOf(res[1]) != 5 || len(ra.calls) != 1 {
		t.Fatalf("no controller: %+v %v, calls %v", res, err, ra.calls)
	}

	// The same partition twice is refused both times.
	ra.calls, ra.refuse = nil, nil
	res, err = f.core.AlterPartitionReassignmentsEach(ctx, []metadata.Reassignment{good0, good1, {Topic: "t", Partition: 0, Replicas: []int32{2, 3}}})
	if err != nil || codeOf(res[0]) != 39 || codeOf(res[1]) != 0 || codeOf(res[2]) != 39 {
		t.Fatalf("t-0 twice: %+v %v", res, err)
	}
	if len(ra.calls) != 1 || len(ra.calls[0]) != 1 || ra.calls[0][0].Partition != 1 {
		t.Fatalf("passed on %v, want t-1 alone", ra.calls)
	}
	if _, err := f.core.AlterPartitionReassignmentsEach(ctx, nil); !errors.Is(err, replica.ErrInvalidRequest) {
		t.Fatalf("no partitions: %v", err)
	}
}
