package storage

// The cleaner's swap (step 3 of a pass, clean.go): a cleaned segment's
// files written and fsynced under ".cleaned" names take the place of the
// segments they replace through ".swap" names, the commit point; at
// start, completeSwaps finishes a swap a crash interrupted and removes
// what one that had not committed left.

import (
	"errors"
	"fmt"
	"math"

	"github.com/quirelog/quire/record"
)

// writeSyncedFile creates name holding data, fsynced.
func writeSyncedFile(fsys FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cleanedTxns is a cleaned segment's aborted transactions: on, its
// .txnindex is part of the swap, and kept replaces the log's entries
// whose markers lie from its base to end.
type cleanedTxns struct {
	on   bool
	end  int64
	kept []AbortedTxn
}

// swapIn replaces the segments of g, still in the log, by the cleaned
// segment ns whose files are names[i]+".cleaned", the .log last.
func (l *Log) swapIn(g []*segment, ns *segment, names []string, gen int64, removeTemp func(), txns cleanedTxns) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	i := -1
	if !l.closed && l.truncations.Load() == gen {
		for j, s := range l.segs {
			if s == g[0] {
				i = j
				break
			}
		}
	}
	ok := i >= 0 && i+len(g) < len(l.segs) // never the active segment
	for j := 0; ok && j < len(g); j++ {
		ok = l.segs[i+j] == g[j]
	}
	l.mu.RUnlock()
	if !ok {
		removeTemp()
		return errCleanAborted
	}
	// The index files first, the .log last: a .log.swap is the commit.
	for _, n := range names {
		if err := l.fs.Rename(n+cleanedSuffix, n+swapSuffix); err != nil {
			removeTemp()
			return fmt.Errorf("storage: clean %s: %w", l, err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		// Whether the rename is durable is unknown: leave the .swap for
		// recovery, and the log failed so that it is reopened.
		return l.fail(fmt.Errorf("storage: clean: %w", err))
	}
	// Committed. The old segments stay readable through their open .log
	// descriptors for the readers that still hold them, and for those
	// that pick them until the new segment is in the list.
	var errs []error
	for _, s := range g {
		errs = append(errs, s.log.keepOpen())
		s.markRemoved(math.MaxInt32)
	}
	if err := errors.Join(errs...); err != nil {
		return l.fail(fmt.Errorf("storage: clean: keep replaced segment open: %w", err))
	}
	// A failure from here leaves the .log.swap for the next open to
	// finish (completeSwaps): the .swap files are renamed only once every
	// replaced file is gone (else an old segment left behind would shadow
	// the new one), and the .log.swap last, after every other rename
	// succeeded (else a .txnindex.swap left behind would be taken for a
	// leftover and its entries lost).
	for _, s := range g {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			errs = append(errs, removeIfExists(l.fs, s.stem+suf))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return l.fail(fmt.Errorf("storage: clean: remove replaced segments: %w", err))
	}
	for _, n := range names {
		if err := l.fs.Rename(n+swapSuffix, n); err != nil {
			return l.fail(fmt.Errorf("storage: clean: finish swap: %w", err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("storage: clean: finish swap: %w", err))
	}
	seg := newSegmentStruct(l.fs, l.opts.Files, l.dir, ns.base)
	seg.created = l.opts.Now()
	seg.idx.buf, seg.idx.written = ns.idx.buf, len(ns.idx.buf)
	seg.tidx.buf, seg.tidx.written = ns.tidx.buf, len(ns.tidx.buf)
	seg.size.Store(ns.size.Load())
	seg.maxTs.Store(ns.maxTs.Load())
	seg.offMaxTs.Store(ns.offMaxTs.Load())
	seg.setRollBase(ns.rollBaseTs)
	seg.bytesSinceIndex = ns.bytesSinceIndex
	seg.reserved = math.MaxInt64 // never appended to
	l.mu.Lock()
	segs := make([]*segment, 0, len(l.segs)-len(g)+1)
	segs = append(segs, l.segs[:i]...)
	segs = append(segs, seg)
	segs = append(segs, l.segs[i+len(g):]...)
	l.segs = segs
	l.mu.Unlock()
	if txns.on {
		// After the new segment is in the list: until then readers may
		// read the old segments, whose aborted records an entry dropped
		// here (a transaction with no batch left) did not cover anyway.
		l.replaceAborted(ns.base, txns.end, txns.kept)
	}
	for _, s := range g {
		s.release() // the log's reference
	}
	return nil
}

// completeSwaps runs at open: it removes the leftovers of a clean pass
// that did not commit (*.cleaned files, index .swap files without a
// .log.swap) and finishes each committed swap (a <base>.log.swap):
// removes the segments whose base offsets lie in its offset range, then
// renames its files to their final names. It returns the directory's
// names afterwards.
func (l *Log) completeSwaps(names []string) ([]string, error) {
	var swaps []int64
	logSwaps := map[int64]bool{}
	for _, n := range names {
		if base, ok := parseSegmentName(n, logSuffix+swapSuffix); ok {
			swaps = append(swaps, base)
			logSwaps[base] = true
		}
	}
	changed := false
	for _, n := range names {
		stray := false
		if len(n) > len(cleanedSuffix) && n[len(n)-len(cleanedSuffix):] == cleanedSuffix {
			stray = true
		}
		for _, suf := range []string{indexSuffix + swapSuffix, timeIndexSuffix + swapSuffix, txnIndexSuffix + swapSuffix} {
			if base, ok := parseSegmentName(n, suf); ok && !logSwaps[base] {
				stray = true
			}
		}
		if stray {
			changed = true
			if err := removeIfExists(l.fs, join(l.dir, n)); err != nil {
				return nil, fmt.Errorf("storage: remove clean leftover %s: %w", n, err)
			}
		}
	}
	for _, base := range swaps {
		changed = true
		stem := join(l.dir, segmentName(base))
		end, err := swapEnd(l.fs, stem+logSuffix+swapSuffix, base)
		if err != nil {
			return nil, fmt.Errorf("storage: read %s: %w", stem+logSuffix+swapSuffix, err)
		}
		for _, n := range names {
			b, ok := parseSegmentName(n, logSuffix)
			if !ok || b < base || b >= end {
				continue
			}
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if suf == txnIndexSuffix && b == base {
					// Its own .txnindex: either the old one, to be
					// replaced by a .txnindex.swap (one is written
					// whenever the old segments had one), or the new
					// one already renamed.
					continue
				}
				if err := removeIfExists(l.fs, join(l.dir, segmentName(b)+suf)); err != nil {
					return nil, fmt.Errorf("storage: finish swap: %w", err)
				}
			}
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			_, serr := l.fs.Stat(stem + suf + swapSuffix)
			if suf == txnIndexSuffix && serr != nil {
				continue // see above
			}
			if err := removeIfExists(l.fs, stem+suf); err != nil {
				return nil, fmt.Errorf("storage: finish swap: %w", err)
			}
			if serr == nil {
				if err := l.fs.Rename(stem+suf+swapSuffix, stem+suf); err != nil {
					return nil, fmt.Errorf("storage: finish swap: %w", err)
				}
			}
		}
		if err := l.fs.Rename(stem+logSuffix+swapSuffix, stem+logSuffix); err != nil {
			return nil, fmt.Errorf("storage: finish swap: %w", err)
		}
		l.logger.Info("finished the swap of a cleaned segment", "base", base, "replaced_up_to", end)
	}
	if !changed {
		return names, nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return nil, fmt.Errorf("storage: sync log dir: %w", err)
	}
	return l.fs.List(l.dir)
}

// swapEnd returns the offset after the last batch of the segment file
// name (base+1 when it has none): the end of the range it replaced.
func swapEnd(fsys FS, name string, base int64) (int64, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return 0, err
	}
	end := base + 1
	var hb [record.HeaderSize]byte
	for pos := int64(0); pos+record.HeaderSize <= size; {
		if _, err := f.ReadAt(hb[:], pos); err != nil {
			return 0, err
		}
		h, err := record.ParseHeader(hb[:])
		if err != nil {
			break // written and fsynced before the commit: not expected
		}
		end = max(end, h.NextOffset())
		pos += int64(h.Size())
	}
	return end, nil
}
