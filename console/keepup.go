package console

import quirev1 "github.com/quirelog/quire/api/quirev1"

// keepUp is whether a group keeps up, as its coordinator works it out
// (DescribeGroup's throughput) and the pages write it: rates over the
// coordinator's last lag refreshes, the lag, the time to drain it and
// the members that would keep it flat.
type keepUp struct {
	// Consume and Produce are records a second, "–" while unknown (the
	// coordinator has looked once, or not at all).
	Consume, Produce string
	// Lag is the records behind, -1 unknown.
	Lag int64
	// Drain is the time until the lag is 0 at these rates: a duration,
	// "caught up", "not draining" (consumed no faster than produced)
	// or "–" (unknown).
	Drain string
	// Needed is the members that would keep the lag flat (-1 unknown),
	// of Members now and at most Partitions.
	Needed, Members, Partitions int
	// NotDraining and Short flag a lag that grows or stays, and fewer
	// members than needed.
	NotDraining, Short bool
}

// keepUpOf writes t; nil (a group the coordinator does not have, or
// an answer without the figures) is all unknown.
func keepUpOf(t *quirev1.GroupThroughput) keepUp {
	if t == nil {
		return keepUp{Consume: "–", Produce: "–", Lag: -1, Drain: "–", Needed: -1}
	}
	k := keepUp{Consume: rateText(t.GetConsumeRate()), Produce: rateText(t.GetProduceRate()), Lag: t.GetLag(),
		Needed: int(t.GetMembersNeeded()), Members: int(t.GetMembers()), Partitions: int(t.GetPartitions())}
	switch d := t.GetDrainSeconds(); {
	case d == 0 && t.GetLag() == 0:
		k.Drain = "caught up"
	case d >= 0:
		k.Drain = secondsText(d)
	case t.GetLag() > 0 && t.GetConsumeRate() >= 0 && t.GetProduceRate() >= 0:
		// -1 with every figure known: consumed no faster than produced.
		k.Drain, k.NotDraining = "not draining", true
	default:
		k.Drain = "–"
	}
	k.Short = k.Needed > k.Members
	return k
}

// rateText writes records a second, "–" when negative (unknown).
func rateText(v float64) string {
	if v < 0 {
		return "–"
	}
	return count(v) + "/s"
}
