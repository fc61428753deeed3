package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// OffsetForLeaderEpoch is not asked of the fakes of the other tests.
func (f *fakeBackend) OffsetForLeaderEpoch(context.Context, string, int32, int32, int32) (int32, int64, error) {
	return -1, -1, errors.New("no epochs here")
}

// epochsBackend leads partition t-0 at leader epoch 5, whose log has
// epochs 1 from offset 0, 3 from 10 and 5 from 25, its log end at 40; it
// does not lead t-1.
type epochsBackend struct {
	fakeBackend
	mu    sync.Mutex
	asked []string
}

func (e *epochsBackend) OffsetForLeaderEpoch(_ context.Context, topic string, part, current, epoch int32) (int32, int64, error) {
	e.mu.Lock()
	e.asked = append(e.asked, fmt.Sprintf("%s-%d current %d epoch %d", topic, part, current, epoch))
	e.mu.Unlock()
	switch {
	case topic != "t":
		return -1, -1, quireError(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION)
	case current >= 0 && current < 5:
		return -1, -1, quireError(quirev1.ErrorCode_FENCED_LEADER_EPOCH)
	case current > 5:
		return -1, -1, quireError(quirev1.ErrorCode_UNKNOWN_LEADER_EPOCH)
	case part != 0:
		return -1, -1, quireError(quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER)
	}
	switch {
	case epoch == 5:
		return 5, 40, nil
	case epoch == 3 || epoch == 4:
		return 3, 25, nil
	case epoch == 1 || epoch == 2:
		return 1, 10, nil
	}
	return -1, -1, nil
}

// franzGoEpochRequest is OffsetForLeaderEpoch as franz-go sends it to
// validate its position after a leader change (KIP-320): v4 (flexible),
// replica id -1, the current leader epoch from its metadata and the epoch
// of the last record it consumed, per partition.
func franzGoEpochRequest(version int16, parts ...[3]int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = version, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p[0], p[1], p[2]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func TestKafkaOffsetForLeaderEpoch(t *testing.T) {
	backend := &epochsBackend{}
	_, k := startServer(t, backend)
	ask := func(req *kmsg.OffsetForLeaderEpochRequest) []kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		k.request(req)
		resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
		resp.Version = req.Version
		k.response(resp, req.Version >= 4)
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != req.Topics[0].Topic {
			t.Fatalf("v%d: topics %+v", req.Version, resp.Topics)
		}
		return resp.Topics[0].Partitions
	}
	type want struct {
		code  int16
		epoch int32
		end   int64
	}
	for _, tc := range []struct {
		name string
		part [3]int32 // partition, current leader epoch, epoch
		want want
	}{
		{"the latest epoch ends at the log end", [3]int32{0, 5, 5}, want{0, 5, 40}},
		{"an older epoch ends where the next starts", [3]int32{0, 5, 3}, want{0, 3, 25}},
		{"an epoch the log skipped: the one below", [3]int32{0, 5, 4}, want{0, 3, 25}},
		{"an epoch newer than any: unknown, no error", [3]int32{0, 5, 9}, want{0, -1, -1}},
		{"no current epoch (-1) is not checked", [3]int32{0, -1, 1}, want{0, 1, 10}},
		{"a current epoch behind the leader's", [3]int32{0, 4, 3}, want{kerr.FencedLeaderEpoch.Code, -1, -1}},
		{"a current epoch ahead of the leader's", [3]int32{0, 6, 3}, want{kerr.UnknownLeaderEpoch.Code, -1, -1}},
		{"not the leader", [3]int32{1, 5, 3}, want{kerr.NotLeaderForPartition.Code, -1, -1}},
	} {
		ps := ask(franzGoEpochRequest(4, tc.part))
		if len(ps) != 1 {
			t.Fatalf("%s: %+v", tc.name, ps)
		}
		p := ps[0]
		if got := (want{p.ErrorCode, p.LeaderEpoch, p.EndOffset}); got != tc.want || p.Partition != tc.part[0] {
			t.Errorf("%s: partition %d %+v, want %+v", tc.name, p.Partition, got, tc.want)
		}
	}

	// Several partitions in one request, each its own answer; v0 and v1
	// carry no current leader epoch (not checked), v0 no epoch answered.
	ps := ask(franzGoEpochRequest(1, [3]int32{0, 4, 3}, [3]int32{1, 4, 3}))
	if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[0].LeaderEpoch != 3 || ps[0].EndOffset != 25 || ps[1].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("v1, two partitions: %+v", ps)
	}
	if ps = ask(franzGoEpochRequest(0, [3]int32{0, 0, 5})); ps[0].ErrorCode != 0 || ps[0].EndOffset != 40 {
		t.Fatalf("v0: %+v", ps)
	}
	req := franzGoEpochRequest(2, [3]int32{0, 5, 1})
	req.Topics[0].Topic = "gone"
	if ps = ask(req); ps[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("an unknown topic: %+v", ps)
	}
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if got := backend.asked[len(backend.asked)-4]; got != "t-0 current -1 epoch 3" {
		t.Fatalf("v1 asked the backend %q, want no current leader epoch", got)
	}
}
