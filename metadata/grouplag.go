package metadata

import "time"

// The figures of consumer group lag, which the group coordinator
// (package coordinator) computes from the committed offsets here and
// what partition leaders answer (coordinator.LogReader).

// PositionQuery names one partition for a leader to answer about, and the
// offsets whose record timestamps are wanted.
type PositionQuery struct {
	Topic     string
	Partition int32
	Offsets   []int64
}

// Position is a leader's answer to a PositionQuery.
type Position struct {
	// Leader tells whether the broker leads the partition; the rest is
	// meaningful only when it does.
	Leader        bool
	HighWatermark int64
	// Timestamps has one entry per PositionQuery.Offsets: the timestamp
	// (ms since the epoch) of the first record at or after the offset,
	// -1 when none is below the high watermark.
	Timestamps []int64
}

// GroupPartitionLag is a group's position in one partition.
type GroupPartitionLag struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset, -1 when none.
	Committed int64
	// HighWatermark is the leader's, -1 when not known.
	HighWatermark int64
	// Lag is HighWatermark-Committed (at least 0), -1 when either is
	// unknown.
	Lag int64
	// LagSeconds is now minus the timestamp of the record at Committed,
	// 0 when caught up, -1 when unknown.
	LagSeconds float64
	// MemberID is the member the partition is assigned to, "" none.
	MemberID string
	// Observed is when the leader answered; zero when it never did.
	Observed time.Time
}

// GroupStats is one consumer group as its coordinator sees it, for
// monitoring.
type GroupStats struct {
	Group string
	// Members counts the group's members.
	Members int
	// Rebalances counts the target assignments this node computed for
	// the group while it was the coordinator.
	Rebalances uint64
	// Partitions has the group's lag in every partition it committed in,
	// as of the last refresh (the lag in seconds as of the call).
	Partitions []GroupPartitionLag
}
