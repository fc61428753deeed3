package storage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/quirelog/quire/record"
)

// Errors returned by this package. Wrapped errors carry details; test with
// errors.Is.
var (
	// ErrOffsetOutOfRange: an offset below the log start or above the log
	// end offset.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrCorruptBatch: a batch failed validation. It also satisfies
	// errors.Is(err, record.ErrCorrupt) and the specific record error.
	ErrCorruptBatch error = &corruptError{err: record.ErrCorrupt}
	// ErrRecordTooLarge: a batch is larger than MaxMessageBytes.
	ErrRecordTooLarge = errors.New("storage: record batch too large")
	// ErrLogFailed: an I/O error hit this log; it refuses appends until it
	// is reopened.
	ErrLogFailed = errors.New("storage: log failed after i/o error")
	// ErrNoKey: a record without a key sent to a compacted log
	// (cleanup.policy compact), which keeps records by key.
	ErrNoKey = errors.New("storage: compacted topic cannot accept a record without a key")
	// ErrOffsetOverlap: a follower append starts below the log end offset.
	ErrOffsetOverlap = errors.New("storage: offset overlap")
	// ErrOffsetGap: a follower append skips offsets in a log that is not
	// compacted (only a cleaner removes whole batches).
	ErrOffsetGap = errors.New("storage: offset gap")
	// ErrStaleEpoch: an append carries a leader epoch older than the
	// newest one in the log (Kafka's FENCED_LEADER_EPOCH).
	ErrStaleEpoch = errors.New("storage: leader epoch older than the log's")
	// ErrClosed: the log or manager is closed.
	ErrClosed = errors.New("storage: closed")
	// ErrInvalidConfig: a LogConfig field is out of range.
	ErrInvalidConfig = errors.New("storage: invalid config")
	// ErrBadCheckpoint: a checkpoint file cannot be parsed.
	ErrBadCheckpoint = errors.New("storage: bad checkpoint file")

	// The sequence rules of an idempotent producer's batches on a leader
	// append (see Log.AppendAsLeader). A batch already in the log is not
	// an error: the append reports it with AppendInfo.Duplicate.

	// ErrOutOfOrderSequence: a producer's batch does not follow its last
	// one (a gap, or a sequence other than 0 at a new epoch), and is no
	// retry of one of its latest batches (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("storage: out of order sequence number")
	// ErrInvalidProducerEpoch: a producer's batch carries an epoch older
	// than the log has seen for it: a zombie producer (Kafka's
	// INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("storage: invalid producer epoch")
	// ErrUnknownProducerID: a batch at a sequence other than 0 from a
	// producer the log has no state for (expired, or cut off by a
	// truncation); the producer bumps its epoch and starts again at 0
	// (Kafka's UNKNOWN_PRODUCER_ID, KIP-360).
	ErrUnknownProducerID = errors.New("storage: unknown producer id")
	// ErrDuplicateSequence: one append mixes batches already in the log
	// with new ones; it is refused whole (Kafka's DUPLICATE_SEQUENCE_NUMBER).
	ErrDuplicateSequence = errors.New("storage: append mixes duplicate and new batches")

	// Transactions (see Log.AppendMarker).

	// ErrInvalidTxnState: a producer with an ongoing transaction in this
	// log wrote a batch outside it (Kafka's INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("storage: batch outside the producer's ongoing transaction")
	// ErrCoordinatorFenced: a transaction marker from a coordinator epoch
	// older than the log has seen (Kafka's TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("storage: transaction marker from a fenced coordinator")
	// ErrOpenTransaction: DeleteRecords would cut into a transaction not
	// yet committed or aborted; the records up to its first offset may
	// be deleted.
	ErrOpenTransaction = errors.New("storage: delete would cut an ongoing transaction")
)

// errBadSnapshot: a producer state snapshot cannot be read; the log skips
// it for an older one or the log itself, so it never reaches a caller.
var errBadSnapshot = errors.New("storage: bad producer state snapshot")

// corrupt wraps a record validation error so that it satisfies both
// ErrCorruptBatch and the original record error, saying "corrupt batch"
// once: "storage: corrupt batch: crc mismatch".
func corrupt(err error) error {
	if errors.Is(err, ErrCorruptBatch) {
		return err
	}
	return &corruptError{err: err}
}

// corruptError is ErrCorruptBatch with the record error that caused it.
type corruptError struct{ err error }

func (e *corruptError) Error() string {
	const prefix = "storage: corrupt batch"
	msg := e.err.Error()
	if rest, ok := strings.CutPrefix(msg, record.ErrCorrupt.Error()); ok {
		return prefix + rest
	}
	return prefix + ": " + msg
}

func (e *corruptError) Unwrap() error { return e.err }

func (e *corruptError) Is(target error) bool { return target == ErrCorruptBatch }

// ValidOffsets says which offsets a log with this start and end holds, for
// error messages: "valid offsets are 0 to 2 (log end 3)", or for an empty
// log "the log is empty (log start and end 3)". The log end itself is
// where the next record goes: a fetch there waits rather than fails.
func ValidOffsets(start, end int64) string {
	if end <= start {
		return fmt.Sprintf("the log is empty (log start and end %d)", end)
	}
	return fmt.Sprintf("valid offsets are %d to %d (log end %d)", start, end-1, end)
}
