package client

import (
	"fmt"
	"time"
)

// Offset is where a consumer starts reading a partition.
type Offset struct {
	kind     offsetKind
	at       int64   // offset, or timestamp in ms
	group    string  // AtCommitted
	fallback *Offset // AtCommitted: where the group committed nothing
}

type offsetKind int8

const (
	offsetStart offsetKind = iota
	offsetEnd
	offsetExact
	offsetTime
	offsetCommitted
	offsetNone
)

// AtStart starts at the partition's log start offset (the earliest record
// kept).
func AtStart() Offset { return Offset{kind: offsetStart} }

// AtEnd starts at the high watermark: only records produced from now on.
func AtEnd() Offset { return Offset{kind: offsetEnd} }

// At starts at an exact offset. An offset out of range restarts at the
// ConsumeResetOffset, or is reported with ConsumeResetNone.
func At(offset int64) Offset { return Offset{kind: offsetExact, at: offset} }

// Exact reports whether o is an exact offset (At).
func (o Offset) Exact() bool { return o.kind == offsetExact }

// AtTimestamp starts at the first record whose timestamp is at or after t,
// or at the end when there is none.
func AtTimestamp(t time.Time) Offset { return Offset{kind: offsetTime, at: t.UnixMilli()} }

// NoReset is a fallback of AtCommitted (and a GroupConfig.Reset) that
// starts nowhere, Kafka's auto.offset.reset=none: a partition its group
// never committed is not read, and Poll reports ErrNoCommittedOffset for
// it, again after every retry backoff, until the group commits an offset
// for it (or a group consumer Seeks it). It is no start of its own.
func NoReset() Offset { return Offset{kind: offsetNone} }

// AtCommitted starts at the offset a consumer group committed for the
// partition (see Client.CommitOffsets), or at fallback where the group
// committed none. A fallback that is itself AtCommitted is replaced by its
// own fallback. NewConsumer refuses a bad group id (see ValidateGroupID)
// up front, rather than have every retry of the group's offsets fail.
func AtCommitted(group string, fallback Offset) Offset {
	if fallback.kind == offsetCommitted {
		fallback = *fallback.fallback
	}
	return Offset{kind: offsetCommitted, group: group, fallback: &fallback}
}

// validate checks what a consumer can check of o before using it: the
// group id of an AtCommitted.
func (o Offset) validate() error {
	switch o.kind {
	case offsetCommitted:
		return ValidateGroupID(o.group)
	case offsetNone:
		return fmt.Errorf("%w: NoReset is only a fallback of AtCommitted", ErrInvalidOffset)
	}
	return nil
}

func (o Offset) String() string {
	switch o.kind {
	case offsetStart:
		return "start"
	case offsetEnd:
		return "end"
	case offsetExact:
		return fmt.Sprint(o.at)
	case offsetCommitted:
		return fmt.Sprintf("committed by %s, else %s", o.group, o.fallback)
	case offsetNone:
		return "none"
	}
	return fmt.Sprintf("@%d", o.at)
}
