package replica

import (
	"testing"
	"time"
)

// TestReplicaStagesTimeEachAppend follows one acks=all append through the
// stages: a follower reads it, its next fetch moves the HW past it, the
// produce is answered, a consumer reads it. Each stage counts the append
// once, however often it is read again.
func TestReplicaStagesTimeEachAppend(t *testing.T) {
	rm1, rm2 := replicaOn(t, 1), replicaOn(t, 2)
	leader := lead(t, rm1, 1, []int32{1, 2})
	follower := follow(t, rm2, 1, 1)
	res, err := leader.Append(testBatch(3), -1)
	if err != nil {
		t.Fatal(err)
	}
	count := func(s Stage) uint64 { return rm1.StageLatencies()[s].Count() }
	for _, s := range Stages() {
		if n := count(s); n != 0 {
			t.Fatalf("%v counted %d before anything happened", s, n)
		}
	}
	fetchOnce(t, leader, follower, 2) // reads the append
	if count(StageFollowerRead) != 1 || count(StageReplicated) != 0 {
		t.Fatalf("after the follower's read: %v", FormatStages(rm1.StageLatencies()))
	}
	fetchOnce(t, leader, follower, 2) // says it has it: the HW passes it
	fetchOnce(t, leader, follower, 2)
	if count(StageFollowerRead) != 1 || count(StageReplicated) != 1 {
		t.Fatalf("after the follower's next fetch: %v", FormatStages(rm1.StageLatencies()))
	}
	if err := leader.AwaitReplicated(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := leader.Read(0, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	st := rm1.StageLatencies()
	for _, s := range Stages() {
		if st[s].Count() != 1 {
			t.Errorf("%v counted %d, want 1: %s", s, st[s].Count(), FormatStages(st))
		}
	}
	// Each later stage is reached no sooner than the one before.
	if st[StageDelivered].Sum < st[StageReplicated].Sum || st[StageReplicated].Sum < st[StageFollowerRead].Sum {
		t.Errorf("stages out of order: %s", FormatStages(st))
	}
	if len(leader.trace.pending) != 0 {
		t.Errorf("%d appends still traced after every stage", len(leader.trace.pending))
	}
}

func TestReplicaStageHistogramQuantiles(t *testing.T) {
	var h stageHist
	for range 98 {
		h.observe(500 * time.Microsecond) // bucket [256, 512) µs
	}
	h.observe(3 * time.Millisecond)
	h.observe(time.Hour) // the last bucket
	s := h.snapshot()
	if s.Count() != 100 {
		t.Fatalf("count %d", s.Count())
	}
	if q := s.Quantile(0.5); q != 512*time.Microsecond {
		t.Errorf("p50 %v, want 512µs", q)
	}
	if q := s.Quantile(0.99); q != 4096*time.Microsecond {
		t.Errorf("p99 %v, want 4.096ms", q)
	}
	if q := s.Quantile(1); q != BucketBound(histBuckets-1) {
		t.Errorf("max %v", q)
	}
	if d := s.Sub(s); d.Count() != 0 || d.Sum != 0 {
		t.Errorf("h - h = %+v", d)
	}
}
