// Package share is the state machine of one share-partition: the part of a
// share group (Kafka's KIP-932 queues) that hands the records of one topic
// partition to the group's members one by one, instead of whole partitions to
// one member each.
//
// It is pure: no raft, no network, no goroutines, no clock of its own. Every
// operation takes the time as an argument, so a test drives it with a fake
// clock and a runtime around it (the share coordinator) does the I/O: it reads
// the log, writes dead letters, persists what it must.
//
// # The window
//
// A Partition keeps the records between its start offset (every record below
// it is finished: acknowledged, or archived) and its end offset (the next
// offset never yet offered). Each record in that window has a state:
//
//	available    may be acquired by any member
//	acquired     locked to one member until a deadline
//	acknowledged accepted by the member that held it; never delivered again
//	archived     rejected by a member, past the delivery count limit, or an
//	             offset the log holds no record for (a gap)
//
// and a delivery count, raised each time it is acquired. The start offset
// moves past the contiguous prefix of finished records.
//
// Acquire first releases expired locks, then takes the records the caller
// read from the log at End(), then locks up to maxRecords available records
// to the member for the record lock duration. Acknowledge accepts, releases,
// rejects or renews records the member holds. A released or expired record
// whose delivery count has reached the limit is archived and reported as a
// dead letter, as is a rejected one; the caller writes dead letters to the
// group's dead-letter topic (TakeDeadLetters).
//
// # Per-key ordering
//
// With Config.KeyOrdering, the records of one key are never in flight to two
// members at once and are delivered in offset order:
//
//   - a member may acquire a record of key k only if no other member holds a
//     record of k and every earlier unfinished record of k is held by this
//     member (so a released or expired record is redelivered before any
//     later record of its key), and none of them was handed out by an
//     earlier acquisition: a member gets the later records of a key only
//     once it has acknowledged (or released, or let expire) those it was
//     handed before, since the answer handing them out may never have
//     reached it;
//   - a rejected or dead-lettered record is finished and does not block its
//     key;
//   - MaxInFlightPerKey bounds how many records of one key one member holds.
//
// Records without a key have no ordering constraint. A member leaving
// releases everything it holds.
package share
