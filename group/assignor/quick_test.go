package assignor

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// Randomised checks of both assignors against a naive model, in the
// manner of etcd's quorum/quick_test.go.

type scenario struct {
	parts   map[string]int32
	members []Member
	same    bool // every member subscribes to the same topics
}

func randomScenario(rng *rand.Rand) scenario {
	s := scenario{parts: map[string]int32{}, same: rng.Intn(2) == 0}
	topics := []string{}
	for i, n := 0, 1+rng.Intn(4); i < n; i++ {
		name := fmt.Sprintf("t%d", i)
		topics = append(topics, name)
		s.parts[name] = int32(rng.Intn(13)) // 0: a subscribed topic that does not exist
	}
	all := randomSubset(rng, topics)
	for i, n := 0, 1+rng.Intn(9); i < n; i++ {
		m := Member{ID: fmt.Sprintf("m%02d", rng.Intn(100))}
		if slices.ContainsFunc(s.members, func(o Member) bool { return o.ID == m.ID }) {
			continue
		}
		if s.same {
			m.Topics = all
		} else {
			m.Topics = randomSubset(rng, topics)
		}
		s.members = append(s.members, m)
	}
	return s
}

func randomSubset(rng *rand.Rand, from []string) []string {
	out := []string{}
	for _, t := range from {
		if rng.Intn(3) > 0 {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		out = append(out, from[rng.Intn(len(from))])
	}
	return out
}

// randomCurrent gives members random current partitions: some valid, some
// of other topics, some out of range, some claimed twice.
func randomCurrent(rng *rand.Rand, s scenario) {
	for i := range s.members {
		s.members[i].Current = nil
		for topic, n := range s.parts {
			for p := int32(0); p < n+1; p++ {
				if rng.Intn(len(s.members)+1) == 0 {
					s.members[i].Current = append(s.members[i].Current, TopicPartition{topic, p})
				}
			}
		}
	}
}

func counts(a Assignment) (lo, hi int) {
	lo = -1
	for _, ps := range a {
		if lo < 0 || len(ps) < lo {
			lo = len(ps)
		}
		hi = max(hi, len(ps))
	}
	return lo, hi
}

// validCurrent is what the model keeps of each member's current
// partitions: subscribed, existing, not claimed by a lower id.
func validCurrent(ms []Member, parts map[string]int32) map[string][]TopicPartition {
	sorted := slices.Clone(ms)
	slices.SortFunc(sorted, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	seen := map[TopicPartition]bool{}
	out := map[string][]TopicPartition{}
	for _, m := range sorted {
		for _, tp := range m.Current {
			if !slices.Contains(m.Topics, tp.Topic) || tp.Partition >= parts[tp.Topic] || seen[tp] {
				continue
			}
			seen[tp] = true
			out[m.ID] = append(out[m.ID], tp)
		}
	}
	return out
}

// moves counts the valid current partitions that changed owner.
func moves(valid map[string][]TopicPartition, got Assignment) int {
	n := 0
	for id, ps := range valid {
		for _, tp := range ps {
			if !slices.Contains(got[id], tp) {
				n++
			}
		}
	}
	return n
}

// minMoves is the naive lower bound on moves for members all subscribed
// to the same topics: try every choice of which members get the larger
// share of a balanced split, keep the best.
func minMoves(ms []Member, parts map[string]int32, valid map[string][]TopicPartition) int {
	total := 0
	for _, t := range ms[0].Topics {
		total += int(parts[t])
	}
	m := len(ms)
	floor, extra := total/m, total%m
	held := 0
	for _, ps := range valid {
		held += len(ps)
	}
	best := -1
	for mask := 0; mask < 1<<m; mask++ {
		if bitCount(mask) != extra {
			continue
		}
		kept := 0
		for i, mem := range ms {
			quota := floor
			if mask&(1<<i) != 0 {
				quota++
			}
			kept += min(len(valid[mem.ID]), quota)
		}
		if moved := held - kept; best < 0 || moved < best {
			best = moved
		}
	}
	return best
}

func bitCount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func TestAssignorQuickOwnership(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for it := 0; it < 3000; it++ {
		s := randomScenario(rng)
		if it%2 == 1 {
			randomCurrent(rng, s)
		}
		for _, a := range []Assignor{Uniform, Range, RoundRobin} {
			got := a.Assign(s.members, s.parts)
			checkOwnedOnce(t, s.members, s.parts, got)
			if again := a.Assign(s.members, s.parts); !equalAssignment(again, got) {
				t.Fatalf("%s is not deterministic: %v then %v", a.Name(), got, again)
			}
		}
		if t.Failed() {
			t.Fatalf("iteration %d: %+v", it, s)
		}
	}
}

func TestAssignorQuickUniformBalance(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for it := 0; it < 3000; it++ {
		s := randomScenario(rng)
		if it%2 == 1 {
			randomCurrent(rng, s)
		}
		got := Uniform.Assign(s.members, s.parts)
		if s.same {
			if lo, hi := counts(got); hi-lo > 1 {
				t.Fatalf("iteration %d: counts from %d to %d: %v", it, lo, hi, got)
			}
			continue
		}
		// Differing subscriptions: no member holds two more than another
		// that subscribes to one of its partitions' topics.
		for _, d := range s.members {
			for _, r := range s.members {
				if len(got[d.ID])-len(got[r.ID]) < 2 {
					continue
				}
				for _, tp := range got[d.ID] {
					if slices.Contains(r.Topics, tp.Topic) {
						t.Fatalf("iteration %d: %s holds %d and could give %v to %s holding %d: %v (members %+v)",
							it, d.ID, len(got[d.ID]), tp, r.ID, len(got[r.ID]), got, s.members)
					}
				}
			}
		}
	}
}

func TestAssignorQuickRangeSplit(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for it := 0; it < 2000; it++ {
		s := randomScenario(rng)
		got := Range.Assign(s.members, s.parts)
		for topic, n := range s.parts {
			var subs []string
			for _, m := range s.members {
				if slices.Contains(m.Topics, topic) {
					subs = append(subs, m.ID)
				}
			}
			slices.Sort(subs)
			next := int32(0)
			for i, id := range subs {
				want := int(n) / len(subs)
				if i < int(n)%len(subs) {
					want++
				}
				var mine []TopicPartition
				for _, tp := range got[id] {
					if tp.Topic == topic {
						mine = append(mine, tp)
					}
				}
				if len(mine) != want || (want > 0 && mine[0].Partition != next) {
					t.Fatalf("iteration %d: %s owns %v of %s (%d partitions, %d subscribers), want %d from %d",
						it, id, mine, topic, n, len(subs), want, next)
				}
				next += int32(want)
			}
		}
	}
}

// With the same subscriptions, uniform moves no more partitions than the
// naive lower bound, from an arbitrary current assignment and from its own
// previous assignment after a member joins or leaves.
func TestAssignorQuickUniformSticky(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for it := 0; it < 3000; it++ {
		s := randomScenario(rng)
		if !s.same {
			continue
		}
		switch it % 3 {
		case 0: // arbitrary current assignment
			randomCurrent(rng, s)
		case 1, 2: // a previous balanced assignment, then a join or a leave
			prev := Uniform.Assign(s.members, s.parts)
			for i := range s.members {
				s.members[i].Current = prev[s.members[i].ID]
			}
			if it%3 == 1 || len(s.members) == 1 {
				s.members = append(s.members, Member{ID: "joiner", Topics: s.members[0].Topics})
			} else {
				s.members = slices.Delete(s.members, 0, 1)
			}
		}
		valid := validCurrent(s.members, s.parts)
		got := Uniform.Assign(s.members, s.parts)
		if moved, bound := moves(valid, got), minMoves(s.members, s.parts, valid); moved != bound {
			t.Fatalf("iteration %d: moved %d partitions, the least possible is %d\nmembers %+v\ngot %v", it, moved, bound, s.members, got)
		}
	}
}
