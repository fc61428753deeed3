package metadata

import (
	"errors"
	"testing"
)

func brokers(racks ...string) []BrokerInfo {
	var out []BrokerInfo
	for i, r := range racks {
		out = append(out, BrokerInfo{ID: int32(i + 1), Rack: r})
	}
	return out
}

func TestControllerPlacementSpreadsEvenly(t *testing.T) {
	t.Parallel()
	live := brokers("", "", "")
	assign, err := placeReplicas(live, 0, 6, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	replicas := map[int32]int{}
	for _, rs := range assign {
		leaders[rs[0]]++
		seen := map[int32]bool{}
		for _, r := range rs {
			if seen[r] {
				t.Fatalf("replica twice in %v", rs)
			}
			seen[r] = true
			replicas[r]++
		}
	}
	for id := int32(1); id <= 3; id++ {
		if leaders[id] != 2 || replicas[id] != 6 {
			t.Fatalf("broker %d: %d leaders, %d replicas (%v)", id, leaders[id], replicas[id], assign)
		}
	}
	if _, err := placeReplicas(live, 0, 1, 4, 0); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("rf 4 on 3 brokers: %v", err)
	}
}

func TestControllerPlacementRackAware(t *testing.T) {
	t.Parallel()
	live := brokers("a", "a", "b", "b", "c", "c")
	assign, err := placeReplicas(live, 0, 12, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	rack := map[int32]string{}
	for _, b := range live {
		rack[b.ID] = b.Rack
	}
	leaders := map[int32]int{}
	for _, rs := range assign {
		leaders[rs[0]]++
		racks := map[string]bool{}
		for _, r := range rs {
			racks[rack[r]] = true
		}
		if len(racks) != 3 {
			t.Fatalf("partition %v spans racks %v", rs, racks)
		}
	}
	for _, b := range live {
		if leaders[b.ID] != 2 {
			t.Fatalf("leaders %v", leaders)
		}
	}
}
