package group

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// Heartbeats from clients that break the protocol (any epoch, partitions
// they were never given, subscriptions changing at random) must never
// make the coordinator give one partition to two members, and a refused
// heartbeat must change nothing.
func TestGroupAdversarialHeartbeats(t *testing.T) {
	for seed := int64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewSource(seed))
		cfg := DefaultConfig()
		cfg.SessionTimeout, cfg.HeartbeatInterval, cfg.MaxSize = 2*time.Second, time.Second, 6
		m := newMachine(t, cfg)
		topics := map[string]int32{"a": 3, "b": 5}
		m.SetTopics(topics)
		now := epoch0
		var log []Record
		for step := 0; step < 2000; step++ {
			now = now.Add(time.Duration(rng.Intn(300)) * time.Millisecond)
			switch r := rng.Intn(100); {
			case r < 3:
				topics[fmt.Sprintf("t%d", rng.Intn(3))] = int32(1 + rng.Intn(4))
				log = append(log, m.SetTopics(topics)...)
			case r < 10:
				log = append(log, m.Tick(now)...)
			default:
				hb := randomHeartbeat(rng, m, now)
				before := m.Snapshot()
				_, recs, err := m.Heartbeat(hb)
				if err != nil {
					if len(recs) != 0 || !reflect.DeepEqual(m.Snapshot(), before) {
						t.Fatalf("seed %d: refused heartbeat %+v (%v) changed the state: %v", seed, hb, err, recs)
					}
				}
				log = append(log, recs...)
			}
			checkInvariants(t, m)
		}
		again := newMachine(t, cfg)
		if _, err := again.Replay(log, topics, now); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again.Snapshot(), m.Snapshot()) {
			t.Fatalf("seed %d: replayed state differs", seed)
		}
	}
}

func randomHeartbeat(rng *rand.Rand, m *Machine, now time.Time) Heartbeat {
	hb := Heartbeat{Group: "g", MemberID: fmt.Sprintf("m%d", rng.Intn(8)), Now: now}
	var mem *member
	if g := m.groups["g"]; g != nil {
		mem = g.members[hb.MemberID]
	}
	switch r := rng.Intn(10); {
	case r < 1:
		hb.MemberEpoch = JoinEpoch
	case r < 2:
		hb.MemberEpoch = LeaveEpoch
	case r < 3:
		hb.MemberEpoch = int32(rng.Intn(40)) - 2
	case mem != nil && r < 5:
		hb.MemberEpoch = mem.previousEpoch
	case mem != nil:
		hb.MemberEpoch = mem.epoch
	default:
		hb.MemberEpoch = JoinEpoch
	}
	if hb.MemberEpoch == JoinEpoch || rng.Intn(10) == 0 {
		subs := []Subscription{{Topics: []string{"a"}}, {Topics: []string{"a", "b"}}, {Regex: "t.*"}, {Regex: "(a|t1)"}, {Regex: "("}}
		sub := subs[rng.Intn(len(subs))]
		hb.Subscription = &sub
	}
	if hb.MemberEpoch == JoinEpoch || rng.Intn(20) == 0 {
		hb.RebalanceTimeout = time.Duration(rng.Intn(4)) * time.Second
	}
	if rng.Intn(5) > 0 {
		hb.HasOwned = true
		switch {
		case mem != nil && rng.Intn(3) > 0:
			// Part of what it holds, as an honest member might.
			for _, tp := range append(append([]TopicPartition{}, mem.assigned...), mem.pendingRevocation...) {
				if rng.Intn(3) > 0 {
					hb.Owned = append(hb.Owned, tp)
				}
			}
		default:
			for i := rng.Intn(4); i > 0; i-- {
				hb.Owned = append(hb.Owned, TopicPartition{Topic: []string{"a", "b", "t0"}[rng.Intn(3)], Partition: int32(rng.Intn(6))})
			}
		}
	}
	if rng.Intn(30) == 0 {
		hb.Assignor = []string{"uniform", "range", "sticky"}[rng.Intn(3)]
	}
	return hb
}
