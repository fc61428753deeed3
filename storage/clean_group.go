package storage

// A clean pass's rewrite (step 2, clean.go): the segments below the end
// of the mapped part, in groups, each written as one new segment whose
// batches keep what the map, the delete horizon and the transactions
// (clean_txn.go) let stay.

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/quirelog/quire/record"
)

// groupSegments splits segs into runs of consecutive segments to be
// rewritten as one: at most segment.bytes of data, their index entries
// within segment.index.bytes, their offsets within 2^31 of the first.
func groupSegments(segs []*segment, cfg LogConfig) [][]*segment {
	var groups [][]*segment
	for i := 0; i < len(segs); {
		j := i + 1
		size := segs[i].size.Load()
		idx := int64(len(segs[i].idx.buf))
		tidx := int64(len(segs[i].tidx.buf))
		for j < len(segs) {
			s := segs[j]
			end := int64(math.MaxInt64)
			if j+1 < len(segs) {
				end = segs[j+1].base - 1
			}
			if size+s.size.Load() > cfg.SegmentBytes ||
				idx+int64(len(s.idx.buf)) > int64(cfg.SegmentIndexBytes) ||
				tidx+int64(len(s.tidx.buf)) > int64(cfg.SegmentIndexBytes) ||
				(end != math.MaxInt64 && end-segs[i].base > math.MaxInt32) ||
				(end == math.MaxInt64 && s.base-segs[i].base > math.MaxInt32/2) {
				break
			}
			size += s.size.Load()
			idx += int64(len(s.idx.buf))
			tidx += int64(len(s.tidx.buf))
			j++
		}
		groups = append(groups, segs[i:j])
		i = j
	}
	return groups
}

// groupCtx is what a pass hands each group's rewrite.
type groupCtx struct {
	m       *offsetMap
	mapEnd  int64 // the end of the mapped part
	horizon int64 // tombstones below it may go
	nowMs   int64
	end     int64 // the group's offsets end there
	cfg     LogConfig
	// lastBatch is the last batch (its last offset) of each producer
	// the log tracks.
	lastBatch map[int64]int64
	txns      *txnClean
	gen       int64
	th        *throttler
}

// cleanGroup rewrites the segments of g as one and swaps it in.
func (l *Log) cleanGroup(g []*segment, gc groupCtx) (CleanStats, error) {
	var st CleanStats
	m, mapEnd, horizon, cfg, lastBatch, th := gc.m, gc.mapEnd, gc.horizon, gc.cfg, gc.lastBatch, gc.th
	base := g[0].base
	ns := emptySegment(l.dir, base)
	stem := ns.stem
	// The aborted transactions index goes with the swap when the
	// group's segments had one (or the new one has).
	hadTxns := len(l.abortedIn(base, gc.end)) > 0
	names := []string{stem + indexSuffix, stem + timeIndexSuffix, stem + txnIndexSuffix, stem + logSuffix}
	removeTemp := func() {
		for _, n := range names {
			_ = removeIfExists(l.fs, n+cleanedSuffix)
			_ = removeIfExists(l.fs, n+swapSuffix)
		}
	}
	logF, err := l.fs.Create(stem + logSuffix + cleanedSuffix)
	if err != nil {
		return st, fmt.Errorf("storage: clean %s: %w", l, err)
	}
	closeLog := func() { _ = logF.Close() }

	var (
		f       record.Filter
		out     []byte
		pos     int64 // file position of out[0]
		written int64
		maxTs   = int64(-1)
		offMax  = int64(-1)
	)
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if _, err := logF.WriteAt(out, pos); err != nil {
			return err
		}
		if !th.add(int64(len(out))) {
			return errCleanStopped
		}
		pos += int64(len(out))
		out = out[:0]
		return nil
	}
	dropAll := func(*record.Record) bool {
		st.RecordsRead++
		st.RecordsRemoved++
		return false
	}
	keep := func(r *record.Record) bool {
		st.RecordsRead++
		switch {
		case r.Offset >= mapEnd:
			return true
		case r.Key == nil:
		case m.get(r.Key) > r.Offset:
		case r.Value == nil && r.Offset < horizon:
		default:
			return true
		}
		st.RecordsRemoved++
		return false
	}
	for _, s := range g {
		r := segmentReader{s: s, limit: s.size.Load()}
		for {
			batch, h, err := r.next(th)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				closeLog()
				removeTemp()
				return st, err
			}
			st.BytesRead += int64(len(batch))
			start := len(out)
			if h.Control() {
				out = l.cleanMarker(out, batch, &h, gc, &st)
			} else {
				var kept int
				keepIt := keep
				if gc.txns.onBatch(&h) {
					keepIt = dropAll // an aborted transaction's
				}
				out, kept, _, err = f.Batch(out, batch, keepIt)
				if err != nil {
					closeLog()
					removeTemp()
					return st, fmt.Errorf("storage: read segment %d: %w", s.base, corrupt(err))
				}
				if kept == 0 && h.ProducerID >= 0 && lastBatch[h.ProducerID] == h.LastOffset() {
					out = record.EmptyBatch(out, batch)
				}
			}
			if len(out) > start {
				nh, _ := record.ParseHeader(out[start:])
				if e, ok := ns.trackBatch(&nh, written, cfg.IndexIntervalBytes, &maxTs, &offMax); ok {
					ns.applyEntry(e)
				}
				written += int64(len(out) - start)
			}
			if len(out) >= 1<<20 {
				if err := flush(); err != nil {
					closeLog()
					removeTemp()
					return st, fmt.Errorf("storage: clean %s: %w", l, err)
				}
			}
		}
	}
	st.BytesWritten = written
	ns.size.Store(written)
	ns.maxTs.Store(maxTs)
	ns.offMaxTs.Store(offMax)
	ns.finalTimeEntry()
	err = flush()
	if err == nil {
		err = logF.Sync()
	}
	if cerr := logF.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = writeSyncedFile(l.fs, names[0]+cleanedSuffix, ns.idx.buf)
	}
	if err == nil {
		err = writeSyncedFile(l.fs, names[1]+cleanedSuffix, ns.tidx.buf)
	}
	kept := gc.txns.takeKept()
	withTxns := hadTxns || len(kept) > 0
	if err == nil && withTxns {
		buf := make([]byte, 0, len(kept)*txnIndexEntrySize)
		for _, a := range kept {
			buf = encodeTxnEntry(buf, a)
		}
		err = writeSyncedFile(l.fs, names[2]+cleanedSuffix, buf)
	}
	if err != nil {
		removeTemp()
		return st, fmt.Errorf("storage: clean %s: %w", l, err)
	}
	if !withTxns {
		names = append(names[:2], names[3])
	}
	return st, l.swapIn(g, ns, names, gc.gen, removeTemp, cleanedTxns{on: withTxns, end: gc.end, kept: kept})
}

// cleanMarker appends the marker batch to out as the pass keeps it: as
// it is while its transaction has a batch left or its delete horizon is
// ahead, stamped with a delete horizon the first time its transaction is
// found empty, not at all after that horizon (see clean_txn.go).
func (l *Log) cleanMarker(out, batch []byte, h *record.Header, gc groupCtx, st *CleanStats) []byte {
	st.RecordsRead += int64(h.NumRecords)
	mk, err := record.ParseMarker(batch)
	if err != nil || !gc.txns.onMarker(h, mk) {
		return append(out, batch...)
	}
	if hz, ok := h.DeleteHorizon(); ok {
		if hz <= gc.nowMs {
			st.RecordsRemoved += int64(h.NumRecords)
			return out
		}
		return append(out, batch...)
	}
	start := len(out)
	out = append(out, batch...)
	record.SetDeleteHorizon(out[start:], gc.nowMs+gc.cfg.DeleteRetentionMs)
	return out
}
