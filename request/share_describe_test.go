package request_test

import (
	"errors"
	"testing"

	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
)

// TestCoreShareGroupDescribeAndStats: after a member acquires, releases,
// acquires again, accepts and rejects, ShareGroupDescribe shows what it
// holds (and the oldest lock), the dead letter counted on its partition,
// and ShareStats counts the acquisitions, redeliveries, acknowledgements
// by type, dead letters and what is in flight. A group the node does not
// serve is ErrShareGroupNotFound; key ordering is taken on by a group
// that has delivered nothing and refused by one that has.
func TestCoreShareGroupDescribeAndStats(t *testing.T) {
	f, _ := newShareCore(t, false, nil)
	ctx := ctxT(t)
	produceKeyed(t, f, 0, 4, 2)
	if _, err := f.core.ShareGroupDescribe(ctx, "g"); !errors.Is(err, request.ErrShareGroupNotFound) {
		t.Fatalf("describe before any member: %v, want ErrShareGroupNotFound", err)
	}
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	fetch := func(acks ...share.Ack) []share.AcquiredRange {
		t.Helper()
		res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 4,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0, Acks: acks}}})
		if err != nil || res[0].Err != nil || res[0].AckErr != nil {
			t.Fatalf("fetch: %v %+v", err, res)
		}
		return res[0].Acquired
	}
	if got := fetch(); len(got) != 1 || got[0].First != 0 || got[0].Last != 3 {
		t.Fatalf("first fetch acquired %+v, want 0-3", got)
	}
	// 0-1 released and taken again (count 2); 2 accepted; 3 kept.
	if got := fetch(share.Ack{First: 0, Last: 1, Type: share.Release}, share.Ack{First: 2, Last: 2, Type: share.Accept}); len(got) != 1 || got[0].First != 0 || got[0].Last != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("second fetch acquired %+v, want 0-1 delivered twice", got)
	}
	if _, err := f.core.ShareAcknowledge(ctx, "g", "m", []request.SharePartition{{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 0, Last: 0, Type: share.Reject}}}}); err != nil {
		t.Fatal(err)
	}

	d, err := f.core.ShareGroupDescribe(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Members) != 1 || d.Members[0].MemberID != "m" || d.Members[0].InFlight != 2 || len(d.Partitions) != 1 {
		t.Fatalf("described %+v, want member m holding 2 records of one partition", d)
	}
	p := d.Partitions[0]
	if p.InFlight != 2 || p.Available != 0 || p.DeadLettered != 1 || p.StartOffset != 1 || p.EndOffset != 4 ||
		p.OldestLock.Offset != 3 || p.OldestLock.Member != "m" || p.OldestLock.DeliveryCount != 1 {
		t.Errorf("partition described %+v, want 1 and 3 in flight (3 locked first), 1 dead-lettered, start 1, end 4", p)
	}

	s := f.core.ShareStats()
	want := request.ShareStats{InFlight: 2, Acquired: 6, Redelivered: 2, DeadLettered: 1,
		Acks: map[share.AckType]int64{share.Accept: 1, share.Release: 2, share.Reject: 1, share.Renew: 0}}
	if s.InFlight != want.InFlight || s.Acquired != want.Acquired || s.Redelivered != want.Redelivered || s.DeadLettered != want.DeadLettered {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	for typ, n := range want.Acks {
		if s.Acks[typ] != n {
			t.Errorf("%s acks counted %d, want %d", typ, s.Acks[typ], n)
		}
	}

	// Per-key ordering: g has delivered, so it cannot take it on; h can.
	if err := f.core.ShareGroupRequireKeyOrdering(ctx, "g"); !errors.Is(err, replica.ErrInvalidRequest) {
		t.Errorf("key ordering for a group delivering without it: %v, want invalid request", err)
	}
	if err := f.core.ShareGroupRequireKeyOrdering(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	if d, err := f.core.ShareGroupDescribe(ctx, "h"); err != nil || !d.KeyOrdering {
		t.Errorf("h described %+v, %v: want key ordering", d, err)
	}
}
