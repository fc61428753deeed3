package assignor

import "testing"

// Round-robin deals partitions in turn, as Kafka's RoundRobinAssignor:
// with seven partitions and three members, a takes 0, 3, 6; not range's
// contiguous 0, 1, 2.
func TestAssignorRoundRobinDeals(t *testing.T) {
	got := RoundRobin.Assign(members("c", "a", "b"), map[string]int32{"t": 7})
	want := map[string][]TopicPartition{"a": tps("t", 0, 3, 6), "b": tps("t", 1, 4), "c": tps("t", 2, 5)}
	if !equalAssignment(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Across topics the circle goes on where it stopped, and skips members
// not subscribed to a partition's topic; static members are ordered by
// instance id.
func TestAssignorRoundRobinTopics(t *testing.T) {
	ms := []Member{
		{ID: "m-z", InstanceID: "i-1", Topics: []string{"x", "y"}},
		{ID: "m-a", InstanceID: "i-2", Topics: []string{"x"}},
		{ID: "m-b", InstanceID: "i-3", Topics: []string{"y", "missing"}},
	}
	got := RoundRobin.Assign(ms, map[string]int32{"x": 3, "y": 3})
	// x-0 i-1, x-1 i-2, x-2 (i-3 skipped) i-1, y-0 i-2 skipped: i-3,
	// y-1 i-1, y-2 (i-2 skipped) i-3.
	want := map[string][]TopicPartition{
		"m-z": append(tps("x", 0, 2), tps("y", 1)...),
		"m-a": tps("x", 1),
		"m-b": tps("y", 0, 2),
	}
	if !equalAssignment(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
