// Package storage keeps the log of each partition replica on disk:
// segments of RecordBatch v2 batches with their offset and time indexes,
// checkpoints, recovery, retention, and the state of idempotent producers.
// Segment files are opened on use and closed when idle through a FileCache
// the logs of a Manager share, so the partitions a node holds are not
// bounded by its open-file limit. The segment, index and checkpoint
// formats are drawn in docs/storage.md; it imports nothing of the
// network.
//
// # Log compaction
//
// A log whose cleanup.policy includes compact is compacted by a Cleaner
// (clean.go has the algorithm): a pass writes a group's new segment as
// <base>.log.cleaned, .index.cleaned and .timeindex.cleaned (the formats
// of .log, .index and .timeindex; a .txnindex.cleaned too when the group
// has aborted transactions), commits it by renaming them to .swap
// (the .log last) and then replaces the group's segments; OpenLog removes
// the .cleaned files of a pass that did not commit and finishes the swap
// of one that did. Each log's clean point is kept in the data directory's
// cleaner-offset-checkpoint (the format of the other offset checkpoints),
// and when each clean point was reached, for delete.retention.ms, in the
// log's own clean-marks-checkpoint (clean_marks.go). A transaction
// marker the cleaner will remove carries its delete horizon in its batch
// header (record.SetDeleteHorizon).
// A compacted log's batches may hold fewer records than their offsets
// span, or none (record.Filter, record.EmptyBatch), and its offsets have
// gaps.
//
// # Producer state snapshots
//
// A log keeps, per idempotent producer id, its epoch and its latest
// ProducerWindow batches (see Log.AppendAsLeader for the rules they
// enforce). The state is written to <20-digit offset>.snapshot beside the
// segments when a segment rolls (at the new segment's base offset, written
// without fsync) and when the log closes (at the log end offset, written
// atomically and fsynced); opening or truncating a log reads the newest
// snapshot at or below its end whose CRC and framing check and applies the
// batches after it, so a torn or damaged snapshot only costs a longer
// replay. Snapshots go with their segments (retention, truncation). All
// integers big endian:
//
//	offset size
//	0      1    version (2; version 1, without the two transaction
//	            fields below and with B >= 1, is still read)
//	1      4    CRC-32C (Castagnoli) of bytes 5 to the end
//	5      8    offset: the state holds every batch below it (the file's name)
//	13     4    N, the number of producers
//	17          N producers, by ascending id, each:
//	       0  8   producer id (>= 0)
//	       8  2   producer epoch
//	       10 8   last timestamp: the largest timestamp of its latest batch
//	       18 4   coordinator epoch of its latest transaction marker (-1: none)
//	       22 8   first offset of its ongoing transaction (-1: none)
//	       30 1   B, the number of batches remembered (0 to 5; 0 when its
//	              latest batch at its epoch is a marker that bumped it)
//	       31     B batches, oldest first, 32 bytes each:
//	              0  4  first sequence
//	              4  4  last sequence
//	              8  8  first offset
//	              16 8  last offset
//	              24 8  largest timestamp
//
// # Transactions
//
// A transactional producer's batches carry the transactional attribute;
// its transaction in a log starts at its first such batch and ends at the
// control batch (Kafka's end-of-transaction marker, record.BuildMarker) a
// coordinator has the leader append with Log.AppendMarker. The producer
// state holds each producer's ongoing transaction; the smallest first
// offset among them is the first unstable offset, and the last stable
// offset (LSO) a read_committed consumer reads up to is the smaller of it
// and the high watermark. Aborted transactions are kept in a
// .txnindex file beside the segment holding their marker (the layout is
// drawn in txnindex.go). Retention and DeleteRecords never cut into an
// ongoing transaction.
package storage
