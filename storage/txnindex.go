package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sort"

	"github.com/quirelog/quire/record"
)

// The aborted-transactions index: <20-digit base>.txnindex beside each
// segment that holds abort markers, in Kafka's layout (big endian), one
// 34-byte entry per transaction aborted by a marker in that segment, in
// marker order:
//
//	offset size
//	0      2    version (0)
//	2      8    producer id
//	10     8    first offset: the transaction's first batch in this log
//	18     8    last offset: the abort marker's offset
//	26     8    last stable offset just after the abort
//
// A read_committed consumer is handed the entries a fetch overlaps, and
// drops the aborted producers' batches from each first offset until their
// marker. The log keeps every entry in memory too (Log.aborted); the files
// let it come back without rescanning the log. An entry is written and
// fsynced as its marker is appended; at open, a file is read up to its
// first torn or inconsistent entry and cut there, and entries at or past
// the log end (a cut tail) are dropped; the producer state replay then
// adds any abort marker past the last entry (see replayProducers).
const (
	txnIndexSuffix    = ".txnindex"
	txnIndexEntrySize = 34
	txnIndexVersion   = 0
)

// AbortedTxn is an aborted transaction of a log, as a read_committed
// fetch reports it (Kafka's AbortedTransaction plus the index's LSO).
type AbortedTxn struct {
	ProducerID int64
	// FirstOffset is the offset of the transaction's first batch in
	// this log; LastOffset that of its abort marker.
	FirstOffset, LastOffset int64
	// LastStableOffset is the log's last stable offset just after the
	// abort: every transaction begun below it had ended by then.
	LastStableOffset int64
}

func encodeTxnEntry(dst []byte, a AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.LastStableOffset))
}

// decodeTxnIndex parses the entries of a segment's txnindex file, stopping
// at the first one that is torn, of another version, outside [base, end),
// not after the previous one, or with a last stable offset past its
// marker (it may lie below its first offset: another producer's older
// transaction was still open). It returns the good entries and whether
// the file holds more than them.
func decodeTxnIndex(buf []byte, base, end int64) ([]AbortedTxn, bool) {
	var out []AbortedTxn
	prev := int64(-1)
	for len(buf) >= txnIndexEntrySize {
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(buf[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(buf[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(buf[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(buf[26:])),
		}
		if binary.BigEndian.Uint16(buf) != txnIndexVersion || a.ProducerID < 0 ||
			a.LastOffset < base || a.LastOffset >= end || a.LastOffset <= prev ||
			a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1 {
			return out, true
		}
		prev = a.LastOffset
		out = append(out, a)
		buf = buf[txnIndexEntrySize:]
	}
	return out, len(buf) != 0
}

func txnIndexPath(s *segment) string { return s.stem + txnIndexSuffix }

// loadTxnIndexes reads the txnindex files of the segments into l.aborted,
// cutting each at its first bad entry and dropping entries at or past the
// log end. Called from OpenLog, after load.
func (l *Log) loadTxnIndexes() error {
	leo := l.leo.Load()
	var all []AbortedTxn
	for i, s := range l.segs {
		end := leo
		if i+1 < len(l.segs) {
			end = min(end, l.segs[i+1].base)
		}
		data, err := readWholeFile(l.fs, txnIndexPath(s))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("storage: read %s: %w", txnIndexPath(s), err)
		}
		entries, cut := decodeTxnIndex(data, s.base, end)
		if cut {
			l.logger.Warn("aborted transaction index damaged or past the log end, cutting it",
				"segment", s.base, "entries_kept", len(entries))
			if err := l.rewriteTxnIndex(s, entries); err != nil {
				return err
			}
		}
		all = append(all, entries...)
	}
	l.txnMu.Lock()
	l.aborted = all
	l.txnMu.Unlock()
	return nil
}

// rewriteTxnIndex replaces a segment's txnindex file with entries
// (removing it when there are none).
func (l *Log) rewriteTxnIndex(s *segment, entries []AbortedTxn) error {
	if len(entries) == 0 {
		if err := removeIfExists(l.fs, txnIndexPath(s)); err != nil {
			return fmt.Errorf("storage: remove %s: %w", txnIndexPath(s), err)
		}
		return nil
	}
	buf := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, a := range entries {
		buf = encodeTxnEntry(buf, a)
	}
	if err := writeFileAtomic(l.fs, txnIndexPath(s), buf); err != nil {
		return fmt.Errorf("storage: write %s: %w", txnIndexPath(s), err)
	}
	return nil
}

// lastAborted is the marker offset of the newest entry, -1 if none.
func (l *Log) lastAborted() int64 {
	l.txnMu.RLock()
	defer l.txnMu.RUnlock()
	if len(l.aborted) == 0 {
		return -1
	}
	return l.aborted[len(l.aborted)-1].LastOffset
}

// addAborted records an aborted transaction newer than every entry: in
// memory, and appended to the txnindex file of the segment holding its
// marker and fsynced. Callers hold appendMu.
func (l *Log) addAborted(a AbortedTxn) error {
	l.mu.RLock()
	seg := l.segs[l.floorLocked(a.LastOffset)]
	l.mu.RUnlock()
	l.txnMu.Lock()
	n := len(l.aborted) - sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= seg.base })
	l.aborted = append(l.aborted, a)
	l.txnMu.Unlock()
	f, err := l.fs.OpenReadWrite(txnIndexPath(seg))
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", txnIndexPath(seg), err)
	}
	_, err = f.WriteAt(encodeTxnEntry(nil, a), int64(n)*txnIndexEntrySize)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("storage: write %s: %w", txnIndexPath(seg), err)
	}
	return nil
}

// truncateAborted drops the entries whose marker is at or after end (a
// truncation to end), from memory and from the file of seg, the segment
// end now falls in. Callers hold appendMu.
func (l *Log) truncateAborted(seg *segment, end int64) error {
	l.txnMu.Lock()
	k := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= end })
	cut := k < len(l.aborted)
	l.aborted = l.aborted[:k]
	j := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= seg.base })
	kept := append([]AbortedTxn(nil), l.aborted[j:]...)
	l.txnMu.Unlock()
	if !cut {
		return nil
	}
	return l.rewriteTxnIndex(seg, kept)
}

// dropAbortedBelow forgets the entries whose marker lies below start
// (their segments were deleted).
func (l *Log) dropAbortedBelow(start int64) {
	l.txnMu.Lock()
	k := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= start })
	l.aborted = append(l.aborted[:0:0], l.aborted[k:]...)
	l.txnMu.Unlock()
}

// AbortedTransactions returns the aborted transactions a read_committed
// read of [from, upTo) must know of: those with records in the range
// (first offset below upTo, marker at or after from), in marker order.
// It stops at the first entry whose last stable offset reaches upTo:
// every transaction begun below upTo had ended by then.
func (l *Log) AbortedTransactions(from, upTo int64) []AbortedTxn {
	l.txnMu.RLock()
	defer l.txnMu.RUnlock()
	i := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for ; i < len(l.aborted); i++ {
		a := l.aborted[i]
		if a.FirstOffset < upTo {
			out = append(out, a)
		}
		if a.LastStableOffset >= upTo {
			break
		}
	}
	return out
}

// FirstUnstableOffset is the first offset of the oldest transaction still
// open in the log (math.MaxInt64 when none is). The last stable offset
// (LSO), which read_committed consumers read up to, is the smaller of it
// and the high watermark.
func (l *Log) FirstUnstableOffset() int64 { return l.firstUnstable.Load() }

// LastStableOffset is min(hw, FirstUnstableOffset()).
func (l *Log) LastStableOffset(hw int64) int64 { return min(hw, l.firstUnstable.Load()) }

// applyBatchToProducers applies one appended batch to ps, reading its
// marker when it is a control batch, and records an abort. Callers hold
// appendMu (or own the log).
func (l *Log) applyBatchToProducers(ps *producerState, h *record.Header, batch func() ([]byte, error), index bool) error {
	var m *record.Marker
	if h.Control() && h.ProducerID >= 0 {
		b, err := batch()
		if err != nil {
			return err
		}
		mk, err := record.ParseMarker(b)
		if err != nil {
			// A control batch this log cannot read ends nothing; it was
			// validated on the way in, so this is damage, logged.
			l.logger.Warn("unreadable control batch", "offset", h.BaseOffset, "error", err)
		} else {
			m = &mk
		}
	}
	done, ok := ps.update(h, m)
	if !ok || !done.abort || !index || done.last <= l.lastAborted() {
		return nil
	}
	lso := ps.firstUnstable()
	if lso == math.MaxInt64 {
		lso = done.last + 1
	}
	return l.addAborted(AbortedTxn{ProducerID: done.producerID, FirstOffset: done.first,
		LastOffset: done.last, LastStableOffset: lso})
}
