package replicagrpc

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// A request goes to the wire and back unchanged, whole or incremental,
// with or without the follower's log start; RequestInto leaves nothing of
// the request it reuses.
func TestRequestRoundTrip(t *testing.T) {
	t.Parallel()
	reqs := []*replica.FetchRequest{
		{ReplicaID: 2, Incarnation: "i", MaxWaitMs: 500, MinBytes: 1, MaxBytes: 1 << 20, Partitions: []replica.FetchPartition{
			{Topic: "a", Partition: 3, CurrentLeaderEpoch: 4, FetchOffset: 10, LastFetchedEpoch: 3, PartitionMaxBytes: 1 << 10, LogStartOffset: 2},
			{Topic: "b", LastFetchedEpoch: -1, LogFailed: true, LogStartOffset: -1},
		}},
		{ReplicaID: 3, Incremental: true, Forgotten: []storage.TopicPartition{{Topic: "a", Partition: 3}}},
		{ReplicaID: 3, Incremental: true, Partitions: []replica.FetchPartition{{Topic: "c", FetchOffset: 7, LogStartOffset: 0}}},
	}
	reused := &replica.FetchRequest{}
	for i, want := range reqs {
		msg := RequestToPB(want)
		if got := RequestFromPB(msg); !sameRequest(got, want) {
			t.Fatalf("request %d: %+v came back as %+v", i, want, got)
		}
		RequestInto(reused, msg)
		if !sameRequest(reused, want) {
			t.Fatalf("request %d into a reused one: %+v came back as %+v", i, want, reused)
		}
	}
}

// sameRequest compares requests, an empty slice as none.
func sameRequest(a, b *replica.FetchRequest) bool {
	x, y := *a, *b
	if len(x.Partitions) == 0 && len(y.Partitions) == 0 {
		x.Partitions, y.Partitions = nil, nil
	}
	if len(x.Forgotten) == 0 && len(y.Forgotten) == 0 {
		x.Forgotten, y.Forgotten = nil, nil
	}
	return reflect.DeepEqual(x, y)
}

// An answer goes to the wire and back with its offsets, records,
// divergence and session, a refusal with its code: offset out of range
// and the leadership refusals as the sentinels the fetcher acts on, any
// other as ErrLeaderRefused with its code and message.
func TestResponseRoundTrip(t *testing.T) {
	t.Parallel()
	resp := &replica.FetchResponse{Session: true, Partitions: []replica.FetchResult{
		{Topic: "a", Partition: 1, Records: []byte("r"), HighWatermark: 5, LogStartOffset: 1, LogEndOffset: 9},
		{Topic: "b", Diverging: &replica.EpochEndOffset{Epoch: 3, EndOffset: 40}, HighWatermark: 2, LogEndOffset: 2},
		{Topic: "c", Err: fmt.Errorf("%w: c-0 at 99", storage.ErrOffsetOutOfRange)},
		{Topic: "d", Err: &replica.NotLeaderError{Topic: "d", Leader: 3, Epoch: 7}},
		{Topic: "e", Err: errors.New("disk on fire")},
	}}
	got := testCodec.ResponseFromPB(testCodec.ResponseToPB(resp))
	if !got.Session || len(got.Partitions) != len(resp.Partitions) {
		t.Fatalf("answer came back with session %v and %d partitions", got.Session, len(got.Partitions))
	}
	for i := range 2 {
		if w, g := resp.Partitions[i], got.Partitions[i]; !reflect.DeepEqual(w, g) {
			t.Fatalf("partition %d: %+v came back as %+v", i, w, g)
		}
	}
	if err := got.Partitions[2].Err; !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("offset out of range came back as %v", err)
	}
	if err := got.Partitions[3].Err; !errors.Is(err, replica.ErrNotLeader) || !errors.Is(err, ErrLeaderRefused) {
		t.Fatalf("not leader came back as %v", err)
	}
	if err := got.Partitions[4].Err; !errors.Is(err, ErrLeaderRefused) || errors.Is(err, replica.ErrNotLeader) ||
		err.Error() != "replica: the leader refused the replica fetch: UNKNOWN_SERVER_ERROR: disk on fire" {
		t.Fatalf("an unknown error came back as %v", err)
	}
}
