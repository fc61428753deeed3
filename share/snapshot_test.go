package share

import (
	"errors"
	"fmt"
	"testing"
)

// TestShareSnapshotRestore saves a window with a record in each state,
// restores it and takes the log in again: acknowledged and archived
// records stay finished, acquired ones are released with the count of
// their acquisition (archived as dead letters at the limit), available
// ones keep their count, and nothing acknowledged is delivered again.
func TestShareSnapshotRestore(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DeliveryCountLimit = 2
	p, err := New(cfg, 10)
	if err != nil {
		t.Fatal(err)
	}
	recs := func(from, to int64) []Record {
		var out []Record
		for o := from; o < to; o++ {
			out = append(out, Record{Offset: o, Key: fmt.Appendf(nil, "k%d", o)})
		}
		return out
	}
	if _, err := p.Offer(recs(10, 16), 16); err != nil {
		t.Fatal(err)
	}
	// 10 acknowledged, 11 acquired, 12 archived, 13 acquired a second
	// time (at the limit), 14 released once, 15 never delivered.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Acquire(t0, "a", 5); err != nil {
		t.Fatal(err)
	}
	must(p.Acknowledge(t0, "a", []Ack{{First: 10, Last: 10, Type: Accept}, {First: 12, Last: 12, Type: Reject}, {First: 13, Last: 14, Type: Release}}))
	p.TakeDeadLetters()
	if got, err := p.Acquire(t0, "b", 1); err != nil || len(got) != 1 || got[0].First != 13 {
		t.Fatalf("second acquisition of 13: %v %v", got, err)
	}
	snap := p.Snapshot()
	want := Snapshot{Start: 11, Runs: []Run{
		{Length: 1, State: Acquired, DeliveryCount: 1},
		{Length: 1, State: Archived, DeliveryCount: 1},
		{Length: 1, State: Acquired, DeliveryCount: 2},
		{Length: 1, State: Available, DeliveryCount: 1},
	}}
	if fmt.Sprint(snap) != fmt.Sprint(want) {
		t.Fatalf("snapshot %+v, want %+v", snap, want)
	}

	r, err := Restore(cfg, snap)
	if err != nil {
		t.Fatal(err)
	}
	if r.Start() != 11 || r.End() != 11 || r.Restoring() != 4 {
		t.Fatalf("restored start %d end %d restoring %d, want 11 11 4", r.Start(), r.End(), r.Restoring())
	}
	// The snapshot of a partition not yet taken in again is the same.
	if got := r.Snapshot(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("snapshot before taking in %+v, want %+v", got, want)
	}
	if _, err := r.Offer(recs(11, 17), 17); err != nil {
		t.Fatal(err)
	}
	dead := r.TakeDeadLetters()
	if len(dead) != 1 || dead[0].Offset != 13 || dead[0].Reason != ReasonDeliveryLimit || dead[0].DeliveryCount != 2 || string(dead[0].Key) != "k13" {
		t.Fatalf("dead letters %+v, want offset 13 at the delivery limit", dead)
	}
	got, err := r.Acquire(t0, "c", 10)
	if err != nil {
		t.Fatal(err)
	}
	wantGot := []AcquiredRange{{First: 11, Last: 11, DeliveryCount: 2}, {First: 14, Last: 14, DeliveryCount: 2}, {First: 15, Last: 16, DeliveryCount: 1}}
	if fmt.Sprint(got) != fmt.Sprint(wantGot) {
		t.Fatalf("acquired %v after restore, want %v", got, wantGot)
	}
}

// TestShareRestoreLogStartMoved: offsets the log lost while the state was
// saved are dropped from the restored state with the window.
func TestShareRestoreLogStartMoved(t *testing.T) {
	snap := Snapshot{Start: 5, Runs: []Run{{Length: 3, State: Acknowledged}, {Length: 2, State: Available, DeliveryCount: 1}, {Length: 1, State: Acknowledged, DeliveryCount: 1}}}
	r, err := Restore(DefaultConfig(), snap)
	if err != nil {
		t.Fatal(err)
	}
	r.SetLogStart(9)
	if r.Start() != 9 || r.Restoring() != 2 {
		t.Fatalf("start %d restoring %d, want 9 and 2", r.Start(), r.Restoring())
	}
	if _, err := r.Offer([]Record{{Offset: 9}, {Offset: 10}}, 11); err != nil {
		t.Fatal(err)
	}
	// 9 keeps its delivery count; 10 was saved acknowledged.
	got, err := r.Acquire(t0, "a", 5)
	if err != nil || fmt.Sprint(got) != fmt.Sprint([]AcquiredRange{{First: 9, Last: 9, DeliveryCount: 2}}) {
		t.Fatalf("acquired %v, %v; want offset 9 delivered a second time", got, err)
	}
}

func TestShareSnapshotValidate(t *testing.T) {
	for _, s := range []Snapshot{
		{Start: -1},
		{Runs: []Run{{Length: 0, State: Available}}},
		{Runs: []Run{{Length: 1, State: Archived + 1}}},
		{Runs: []Run{{Length: 1, State: Available, DeliveryCount: -1}}},
	} {
		if _, err := Restore(DefaultConfig(), s); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Restore(%+v): %v, want ErrInvalidRequest", s, err)
		}
	}
}
