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
	// LastStableOffset is the first offset of the partition's oldest
	// open transaction, or HighWatermark if lower.
	LastStableOffset int64
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
	// unknown: what a read_uncommitted consumer has left to read.
	Lag int64
	// LastStableOffset is the leader's (HighWatermark while no
	// transaction is open), -1 when not known.
	LastStableOffset int64
	// StableLag is LastStableOffset-Committed (at least 0), -1 when
	// either is unknown: what a read_committed consumer can read now,
	// without the records of transactions still open. The coordinator
	// cannot tell which isolation a group's consumers read at (a Kafka
	// consumer says it in each fetch, not to its group), so it gives
	// both.
	StableLag int64
	// LagSeconds is now minus the timestamp of the record at Committed,
	// 0 when caught up, -1 when unknown.
	LagSeconds float64
	// MemberID is the member the partition is assigned to, "" none.
	MemberID string
	// Observed is when the leader answered; zero when it never did.
	Observed time.Time
}

// GroupThroughput is how fast a consumer group reads against how fast
// its partitions grow, and what follows for its lag: the figures that
// answer "will it catch up, when, and with how many members". The rates
// are the coordinator's, over its last looks at the committed offsets
// and high watermarks (group.lag.refresh.ms apart, over about twelve of
// them).
type GroupThroughput struct {
	// Lag is the group's lag in records, summed over its partitions
	// whose lag is known; -1 when none is.
	Lag int64
	// ConsumeRate is how many records a second the group's committed
	// offsets moved, summed over its partitions; -1 until the
	// coordinator has looked twice.
	ConsumeRate float64
	// ProduceRate is how many records a second the high watermarks of
	// the same partitions moved; -1 likewise.
	ProduceRate float64
	// DrainSeconds is how long the lag takes to reach 0 at these rates:
	// Lag / (ConsumeRate - ProduceRate). 0 with no lag; -1 when the lag
	// does not shrink at these rates (ConsumeRate <= ProduceRate) or a
	// figure is unknown.
	DrainSeconds float64
	// Members counts the group's members.
	Members int
	// Partitions counts the partitions the group reads or committed in:
	// more members than that have nothing to read.
	Partitions int
	// MembersNeeded is how many members would keep the lag flat at the
	// current produce rate, each reading as fast as the members do now
	// on average (ConsumeRate / Members): ceil(ProduceRate / that), at
	// most Partitions; 0 when nothing is produced; -1 when unknown (no
	// rates yet, no members, or members that read nothing while records
	// come in).
	MembersNeeded int
}

// GroupLag is a group's lag in each partition and its throughput.
type GroupLag struct {
	Partitions []GroupPartitionLag
	Throughput GroupThroughput
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
	// Throughput is the group's rates as of the last refresh.
	Throughput GroupThroughput
}
