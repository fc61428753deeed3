package assignor

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func tps(topic string, parts ...int32) []TopicPartition {
	out := []TopicPartition{}
	for _, p := range parts {
		out = append(out, TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

func members(ids ...string) []Member {
	out := make([]Member, len(ids))
	for i, id := range ids {
		out[i] = Member{ID: id, Topics: []string{"t"}}
	}
	return out
}

func TestAssignorRangeSevenPartitions(t *testing.T) {
	parts := map[string]int32{"t": 7}
	cases := []struct {
		ids  []string
		want map[string][]TopicPartition
	}{
		{[]string{"a"}, map[string][]TopicPartition{"a": tps("t", 0, 1, 2, 3, 4, 5, 6)}},
		{[]string{"b", "a"}, map[string][]TopicPartition{"a": tps("t", 0, 1, 2, 3), "b": tps("t", 4, 5, 6)}},
		{[]string{"c", "a", "b"}, map[string][]TopicPartition{"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4), "c": tps("t", 5, 6)}},
		{[]string{"m8", "m7", "m6", "m5", "m4", "m3", "m2", "m1"}, map[string][]TopicPartition{
			"m1": tps("t", 0), "m2": tps("t", 1), "m3": tps("t", 2), "m4": tps("t", 3),
			"m5": tps("t", 4), "m6": tps("t", 5), "m7": tps("t", 6), "m8": tps("t"),
		}},
	}
	for _, c := range cases {
		got := Range.Assign(members(c.ids...), parts)
		if !equalAssignment(got, c.want) {
			t.Errorf("%d members: got %v, want %v", len(c.ids), got, c.want)
		}
	}
}

func TestAssignorRangePerTopic(t *testing.T) {
	ms := []Member{
		{ID: "a", Topics: []string{"x", "y"}},
		{ID: "b", Topics: []string{"x"}},
		{ID: "c", Topics: []string{"y", "missing"}},
	}
	got := Range.Assign(ms, map[string]int32{"x": 3, "y": 2})
	want := map[string][]TopicPartition{
		"a": append(tps("x", 0, 1), tps("y", 0)...),
		"b": tps("x", 2),
		"c": tps("y", 1),
	}
	if !equalAssignment(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Static members are ordered by instance id, so an instance's next
// process (another member id) takes the same range: a restart of
// instance "a" as member "z" keeps partitions 0 and 1.
func TestAssignorRangeOrdersStaticByInstance(t *testing.T) {
	parts := map[string]int32{"t": 4}
	for _, id := range []string{"m1", "z"} {
		ms := []Member{{ID: id, InstanceID: "a", Topics: []string{"t"}}, {ID: "m2", Topics: []string{"t"}}}
		want := map[string][]TopicPartition{id: tps("t", 0, 1), "m2": tps("t", 2, 3)}
		if got := Range.Assign(ms, parts); !equalAssignment(got, want) {
			t.Errorf("instance a as member %s: got %v, want %v", id, got, want)
		}
	}
}

// A topic of 4 partitions read by a group of 4 members and one of 2: each
// member of the first owns one partition, each of the second two.
func TestAssignorTwoGroupsOneTopic(t *testing.T) {
	parts := map[string]int32{"t": 4}
	for _, a := range []Assignor{Uniform, Range} {
		x := a.Assign(members("x1", "x2", "x3", "x4"), parts)
		y := a.Assign(members("y1", "y2"), parts)
		for _, g := range []struct {
			got  Assignment
			each int
		}{{x, 1}, {y, 2}} {
			checkOwnedOnce(t, members(keys(g.got)...), parts, g.got)
			for id, ps := range g.got {
				if len(ps) != g.each {
					t.Errorf("%s: member %s owns %v, want %d partitions", a.Name(), id, ps, g.each)
				}
			}
		}
	}
}

func TestAssignorUniformSticky(t *testing.T) {
	parts := map[string]int32{"t": 6}
	ms := []Member{
		{ID: "a", Topics: []string{"t"}, Current: tps("t", 0, 1, 2)},
		{ID: "b", Topics: []string{"t"}, Current: tps("t", 3, 4, 5)},
		{ID: "c", Topics: []string{"t"}},
	}
	got := Uniform.Assign(ms, parts)
	want := map[string][]TopicPartition{"a": tps("t", 0, 1), "b": tps("t", 3, 4), "c": tps("t", 2, 5)}
	if !equalAssignment(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// b leaves: a keeps its two and takes b's, c keeps its two.
	ms = []Member{
		{ID: "a", Topics: []string{"t"}, Current: got["a"]},
		{ID: "c", Topics: []string{"t"}, Current: got["c"]},
	}
	got = Uniform.Assign(ms, parts)
	if !slices.Contains(got["a"], TopicPartition{"t", 0}) || !slices.Contains(got["c"], TopicPartition{"t", 5}) || len(got["a"]) != 3 || len(got["c"]) != 3 {
		t.Errorf("after a leave: got %v", got)
	}
}

func TestAssignorUniformHeterogeneous(t *testing.T) {
	// b alone reads y, so it owns all of y; x is spread so that a, which
	// reads only x, is not left with less than b could give it.
	ms := []Member{
		{ID: "a", Topics: []string{"x"}},
		{ID: "b", Topics: []string{"x", "y"}},
	}
	got := Uniform.Assign(ms, map[string]int32{"x": 4, "y": 4})
	want := map[string][]TopicPartition{"a": tps("x", 0, 1, 2, 3), "b": tps("y", 0, 1, 2, 3)}
	if !equalAssignment(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestAssignorLookup(t *testing.T) {
	for _, name := range Names() {
		a, err := Lookup(name)
		if err != nil || a.Name() != name {
			t.Errorf("Lookup(%q) = %v, %v", name, a, err)
		}
	}
	if _, err := Lookup("sticky"); !errors.Is(err, ErrUnsupportedAssignor) {
		t.Errorf("Lookup(sticky) error = %v, want ErrUnsupportedAssignor", err)
	}
	if DefaultName != Names()[0] {
		t.Errorf("the default %q is not listed first in %v", DefaultName, Names())
	}
}

func TestAssignorEmpty(t *testing.T) {
	for _, a := range []Assignor{Uniform, Range, RoundRobin} {
		if got := a.Assign(nil, map[string]int32{"t": 3}); len(got) != 0 {
			t.Errorf("%s with no members: %v", a.Name(), got)
		}
		got := a.Assign(members("a"), map[string]int32{})
		if len(got) != 1 || len(got["a"]) != 0 {
			t.Errorf("%s with no topics: %v", a.Name(), got)
		}
	}
}

func keys(a Assignment) []string {
	out := make([]string, 0, len(a))
	for k := range a {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func equalAssignment(got Assignment, want map[string][]TopicPartition) bool {
	if len(got) != len(want) {
		return false
	}
	for id, ps := range want {
		if !slices.Equal(got[id], ps) {
			return false
		}
	}
	return true
}

// checkOwnedOnce checks that every partition of a subscribed topic is
// owned by exactly one member subscribed to it, that nothing else is
// assigned, and that every member appears with a sorted list.
func checkOwnedOnce(t *testing.T, ms []Member, parts map[string]int32, got Assignment) {
	t.Helper()
	if len(got) != len(ms) {
		t.Fatalf("assignment has %d members, want %d: %v", len(got), len(ms), got)
	}
	owner := map[TopicPartition]string{}
	for _, m := range ms {
		ps, ok := got[m.ID]
		if !ok {
			t.Fatalf("member %s missing from %v", m.ID, got)
		}
		if !slices.IsSortedFunc(ps, Compare) {
			t.Errorf("member %s: partitions not sorted: %v", m.ID, ps)
		}
		for _, tp := range ps {
			if !slices.Contains(m.Topics, tp.Topic) {
				t.Errorf("member %s owns %v of a topic it does not subscribe to", m.ID, tp)
			}
			if tp.Partition < 0 || tp.Partition >= parts[tp.Topic] {
				t.Errorf("member %s owns %v, which does not exist", m.ID, tp)
			}
			if o, dup := owner[tp]; dup {
				t.Errorf("%v owned by %s and %s", tp, o, m.ID)
			}
			owner[tp] = m.ID
		}
	}
	for topic, n := range parts {
		subscribed := false
		for _, m := range ms {
			subscribed = subscribed || slices.Contains(m.Topics, topic)
		}
		for p := int32(0); subscribed && p < n; p++ {
			if _, ok := owner[TopicPartition{topic, p}]; !ok {
				t.Errorf("%s-%d is subscribed but owned by nobody", topic, p)
			}
		}
	}
}

func ExampleRange() {
	a := Range.Assign([]Member{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t"}}}, map[string]int32{"t": 7})
	fmt.Println(a["a"], a["b"])
	// Output: [t-0 t-1 t-2 t-3] [t-4 t-5 t-6]
}
