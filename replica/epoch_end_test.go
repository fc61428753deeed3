package replica

import (
	"errors"
	"testing"
)

// EndOffsetForEpoch answers from the leader's epoch cache, after the
// client's current leader epoch is checked, and only at the leader.
func TestReplicaEndOffsetForEpoch(t *testing.T) {
	rm := testReplicaManager(t)
	if err := rm.makeLeader("t", 0, 3, []int32{1}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	if _, err := p.appendAsLeader(testBatch(4), -1, 1); err != nil {
		t.Fatal(err)
	}
	if err := rm.makeLeader("t", 0, 5, []int32{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.appendAsLeader(testBatch(2), -1, 1); err != nil {
		t.Fatal(err)
	}
	at := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name    string
		current *int32
		epoch   int32
		e       int32
		end     int64
		err     error
	}{
		{"the latest epoch ends at the log end", at(5), 5, 5, 6, nil},
		{"the old epoch ends where the new starts", at(5), 3, 3, 4, nil},
		{"an epoch between: the one below", nil, 4, 3, 4, nil},
		{"an epoch newer than any", nil, 9, -1, -1, nil},
		{"a current epoch behind", at(3), 3, -1, -1, ErrFencedLeaderEpoch},
		{"a current epoch ahead", at(6), 3, -1, -1, ErrUnknownLeaderEpoch},
	} {
		e, end, err := p.EndOffsetForEpoch(tc.current, tc.epoch)
		if e != tc.e || end != tc.end || !errors.Is(err, tc.err) {
			t.Errorf("%s: %d, %d, %v; want %d, %d, %v", tc.name, e, end, err, tc.e, tc.end, tc.err)
		}
	}

	if err := rm.makeFollower("t", 0, 2, 6, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	var nle *NotLeaderError
	if _, _, err := p.EndOffsetForEpoch(nil, 5); !errors.As(err, &nle) || nle.Leader != 2 {
		t.Fatalf("a follower: %v, want NotLeaderError naming leader 2", err)
	}
}
