package group

import (
	"fmt"
	"testing"
	"time"
)

// stableGroups builds groups of members each, every group reading one
// topic of 20 partitions, and heartbeats them until all are stable. It
// returns the heartbeats that keep them so.
func stableGroups(b *testing.B, groups, members int) (*Machine, []Heartbeat) {
	b.Helper()
	m, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	topics := map[string]int32{}
	for i := 0; i < 100; i++ {
		topics[fmt.Sprintf("t%d", i)] = 20
	}
	m.SetTopics(topics)
	var hbs []Heartbeat
	for g := 0; g < groups; g++ {
		for i := 0; i < members; i++ {
			hbs = append(hbs, Heartbeat{
				Group: fmt.Sprintf("group-%d", g), MemberID: fmt.Sprintf("member-%d", i),
				Subscription:     &Subscription{Topics: []string{fmt.Sprintf("t%d", g%100)}},
				RebalanceTimeout: time.Minute, HasOwned: true, Now: epoch0,
			})
		}
	}
	for round := 0; ; round++ {
		if round > 10 {
			b.Fatal("groups not stable after 10 rounds")
		}
		for i := range hbs {
			resp, _, err := m.Heartbeat(hbs[i])
			if err != nil {
				b.Fatal(err)
			}
			hbs[i].MemberEpoch, hbs[i].Subscription = resp.MemberEpoch, nil
			if resp.HasAssignment {
				hbs[i].Owned = resp.Assignment
			}
		}
		stable := true
		for _, l := range m.Groups() {
			stable = stable && l.State == GroupStable
		}
		if stable {
			return m, hbs
		}
	}
}

// BenchmarkHeartbeatStable is the coordinator's cost of one heartbeat of
// a member of a stable group, with 1000 groups of 10 members.
func BenchmarkHeartbeatStable(b *testing.B) {
	m, hbs := stableGroups(b, 1000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hb := hbs[i%len(hbs)]
		hb.Now = epoch0.Add(time.Duration(i) * time.Microsecond)
		if _, recs, err := m.Heartbeat(hb); err != nil || len(recs) != 0 {
			b.Fatal(recs, err)
		}
	}
}

// BenchmarkTick is one Tick over 1000 groups of 10 members, none expired.
func BenchmarkTick(b *testing.B) {
	m, _ := stableGroups(b, 1000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if recs := m.Tick(epoch0.Add(time.Second)); len(recs) != 0 {
			b.Fatal(recs)
		}
	}
}

// BenchmarkRebalance is a member joining a stable group of 10 and the
// group reconciling to stable, then the member leaving and the group
// reconciling again.
func BenchmarkRebalance(b *testing.B) {
	m, hbs := stableGroups(b, 1, 10)
	hbs = append(hbs, Heartbeat{Group: "group-0", MemberID: "joiner", RebalanceTimeout: time.Minute, HasOwned: true, Now: epoch0})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		last := &hbs[len(hbs)-1]
		*last = Heartbeat{Group: "group-0", MemberID: "joiner", RebalanceTimeout: time.Minute, HasOwned: true, Now: epoch0,
			Subscription: &Subscription{Topics: []string{"t0"}}}
		for phase := 0; phase < 2; phase++ {
			for round := 0; ; round++ {
				for j := range hbs {
					resp, _, err := m.Heartbeat(hbs[j])
					if err != nil {
						b.Fatal(err)
					}
					hbs[j].MemberEpoch, hbs[j].Subscription = resp.MemberEpoch, nil
					if resp.HasAssignment {
						hbs[j].Owned = resp.Assignment
					}
				}
				if m.Groups()[0].State == GroupStable {
					break
				}
			}
			if phase == 0 {
				if _, _, err := m.Heartbeat(Heartbeat{Group: "group-0", MemberID: "joiner", MemberEpoch: LeaveEpoch, Now: epoch0}); err != nil {
					b.Fatal(err)
				}
				hbs = hbs[:len(hbs)-1]
			}
		}
		hbs = append(hbs, Heartbeat{})
	}
}
