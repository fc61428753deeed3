package replica

import (
	"context"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/storage"
)

// BenchmarkHandleFetchIdle is a follower's fetch of 200 partitions from
// their leader, one with a new batch and the other 199 idle (the follower
// at their log end), as most fetches of a broker with many partitions are:
// on its own, and in a session (the partitions kept from one fetch to the
// next, the one appended to named anew).
func BenchmarkHandleFetchIdle(b *testing.B) {
	b.Run("alone", func(b *testing.B) { benchHandleFetchIdle(b, false) })
	b.Run("session", func(b *testing.B) { benchHandleFetchIdle(b, true) })
}

func benchHandleFetchIdle(b *testing.B, session bool) {
	const n = 200
	sm, err := storage.OpenManager(b.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sm.Close() })
	rm, err := New(Config{NodeID: 1, Logs: sm, Controller: refusingController{}, Brokers: allRegistered{}, Peers: noNetwork{},
		Fetch: FetchConfig{MaxWait: 500 * time.Millisecond, Backoff: time.Hour}, MaxFetchResponseBytes: 32 << 20, ReadBuffers: bufpool.Shared})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rm.Stop)
	rm.setTopicConfig("t", testTopicConfig())
	req := &FetchRequest{ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 1 << 20}
	var parts []*Partition
	for i := range int32(n) {
		if err := rm.apply("t", i, Assignment{Partition: i, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}); err != nil {
			b.Fatal(err)
		}
		p, _ := rm.Partition("t", i)
		parts = append(parts, p)
		req.Partitions = append(req.Partitions, FetchPartition{Topic: "t", Partition: i, CurrentLeaderEpoch: 1,
			FetchOffset: 0, LastFetchedEpoch: -1, PartitionMaxBytes: 1 << 20})
	}
	if session {
		req.Session = NewLeaderSession()
		defer req.Session.Close()
	}
	ctx := context.Background()
	batch := testBatch(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parts[0].appendAsLeader(batch, 1, 1); err != nil {
			b.Fatal(err)
		}
		resp, err := rm.HandleFetch(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Partitions[0].Records) == 0 {
			b.Fatal("no records for the partition appended to")
		}
		req.Partitions[0] = FetchPartition{Topic: "t", Partition: 0, CurrentLeaderEpoch: 1,
			FetchOffset: parts[0].log.LogEndOffset(), LastFetchedEpoch: 1, PartitionMaxBytes: 1 << 20}
		if !session {
			for i := range req.Partitions {
				req.Partitions[i].checked = nil
			}
		}
		rm.ReleaseFetch(resp)
	}
}
