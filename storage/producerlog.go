package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/quirelog/quire/record"
)

// The log's side of the producer state: snapshot files, rebuilding from
// them and the log, expiry and listing. l.producers is guarded by
// appendMu.

// snapshotPath is the path of the snapshot at offset.
func (l *Log) snapshotPath(offset int64) string {
	return join(l.dir, segmentName(offset)+snapshotSuffix)
}

// snapshotOffsets lists the offsets of the snapshot files, ascending.
func (l *Log) snapshotOffsets() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", l.dir, err)
	}
	var offs []int64
	for _, n := range names {
		if off, ok := parseSegmentName(n, snapshotSuffix); ok {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

// removeSnapshots deletes the snapshot files whose offset satisfies drop.
func (l *Log) removeSnapshots(drop func(off int64) bool) error {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	var errs []error
	for _, off := range offs {
		if drop(off) {
			errs = append(errs, removeIfExists(l.fs, l.snapshotPath(off)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: remove producer snapshots: %w", err)
	}
	return nil
}

// writeSnapshot writes the producer state as of the log end offset to its
// snapshot file. With durable it is written atomically and fsynced (at
// close); otherwise (at a roll, on the append path) it is written in
// place without fsync, and a torn one fails its CRC at the next open and
// is skipped for an older one.
func (l *Log) writeSnapshot(durable bool) error {
	l.producers.end = l.leo.Load()
	path := l.snapshotPath(l.producers.end)
	data := encodeSnapshot(l.producers)
	if durable {
		return writeFileAtomic(l.fs, path, data)
	}
	f, err := l.fs.Create(path)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	return errors.Join(err, f.Close())
}

// loadProducers rebuilds the producer state as of the log end offset:
// from the newest readable snapshot at or below it (or, with none, from
// the start of the first segment) plus the batches after that snapshot.
// Snapshots past the log end (cut off by a truncation or recovery), below
// the first segment, or unreadable are deleted; an unreadable one is
// logged. Callers hold appendMu or own the log (OpenLog).
func (l *Log) loadProducers() error {
	leo := l.leo.Load()
	first := l.segs[0].base
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	var state *producerState
	removed := false
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > leo || off < first {
			if err := removeIfExists(l.fs, l.snapshotPath(off)); err != nil {
				return fmt.Errorf("storage: remove producer snapshot: %w", err)
			}
			removed = true
			continue
		}
		if state != nil {
			continue // older ones stay for truncations below the newest
		}
		data, err := readWholeFile(l.fs, l.snapshotPath(off))
		if err == nil {
			state, err = decodeSnapshot(data, off)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			l.logger.Warn("producer state snapshot unreadable, using an older one or the log", "offset", off, "error", err)
			if rerr := removeIfExists(l.fs, l.snapshotPath(off)); rerr != nil {
				return fmt.Errorf("storage: remove producer snapshot: %w", rerr)
			}
		}
	}
	// A snapshot past a truncation must not come back after a crash to
	// describe batches the log no longer has.
	if removed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("storage: sync %s: %w", l.dir, err)
		}
	}
	if state == nil {
		state = newProducerState(first)
	}
	if err := l.replayProducers(state); err != nil {
		return fmt.Errorf("storage: rebuild producer state: %w", err)
	}
	state.end = leo
	l.producers = state
	l.firstUnstable.Store(state.firstUnstable())
	return nil
}

// replayProducers applies to ps every batch from ps.end to the log end.
func (l *Log) replayProducers(ps *producerState) error {
	from := ps.end
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs...)
	k := l.floorLocked(from)
	idxOff, idxPos := segs[k].idx.lookup(from)
	l.mu.RUnlock()
	for i := k; i < len(segs); i++ {
		s := segs[i]
		limit := s.size.Load()
		pos := int64(0)
		if i == k {
			p, _, found, err := s.locate(from, idxOff, idxPos, limit)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			pos = p
		}
		var applyErr error
		if _, err := s.scanHeaders(pos, limit, func(h *record.Header, at int64) {
			if h.BaseOffset < from || applyErr != nil {
				return
			}
			applyErr = l.applyBatchToProducers(ps, h, func() ([]byte, error) {
				b := make([]byte, h.Size())
				if _, err := s.log.ReadAt(b, at); err != nil {
					return nil, err
				}
				return b, nil
			}, true)
		}); err != nil {
			return err
		}
		if applyErr != nil {
			return applyErr
		}
	}
	return nil
}

// updateProducers applies appended batches to the producer state and
// publishes the first unstable offset.
func (l *Log) updateProducers(batches []byte, numBatches int) error {
	var err error
	if numBatches == 1 {
		h, _ := record.ParseHeader(batches)
		err = l.applyBatchToProducers(l.producers, &h, func() ([]byte, error) { return batches, nil }, true)
	} else {
		forEachBatch(batches, func(b []byte) {
			h, _ := record.ParseHeader(b)
			if e := l.applyBatchToProducers(l.producers, &h, func() ([]byte, error) { return b, nil }, true); e != nil && err == nil {
				err = e
			}
		})
	}
	l.firstUnstable.Store(l.producers.firstUnstable())
	return err
}

// ExpireProducers forgets the producers of this log silent for
// producer.id.expiration.ms (LogConfig.ProducerIDExpirationMs) by the
// log's clock: a later batch of theirs at a sequence other than 0 gets
// ErrUnknownProducerID. It returns how many were forgotten. The broker
// calls it periodically (Manager.ExpireProducers).
func (l *Log) ExpireProducers() int {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0
	}
	n := l.producers.expire(l.opts.Now().UnixMilli(), l.Config().ProducerIDExpirationMs)
	if n > 0 {
		l.logger.Debug("expired producers", "count", n)
	}
	return n
}

// Producers lists the producers this log holds state for, by id.
func (l *Log) Producers() []ProducerInfo {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.producers.list()
}
