package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
)

// Producer state snapshots: <20-digit offset>.snapshot beside the
// segments, holding the producer state as of every batch below offset.
// The layout (big endian) is drawn in the package doc (doc.go).
const (
	snapshotSuffix  = ".snapshot"
	snapshotVersion = 2 // 1: before transactions (read, never written)

	snapshotHeaderSize  = 1 + 4 + 8 + 4         // version, crc, offset, count
	snapshotEntryHeadV1 = 8 + 2 + 8 + 1         // id, epoch, last timestamp, batches
	snapshotEntryHead   = 8 + 2 + 8 + 4 + 8 + 1 // and coordinator epoch, txn first offset
	snapshotBatchSize   = 4 + 4 + 8 + 8 + 8     // sequences, offsets, max timestamp
	snapshotCRCFrom     = 1 + 4                 // the CRC covers what follows it
	snapshotMaxEntry    = snapshotEntryHead + ProducerWindow*snapshotBatchSize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeSnapshot serialises the state (producers in id order, so equal
// states give equal bytes).
func encodeSnapshot(ps *producerState) []byte {
	ids := make([]int64, 0, len(ps.producers))
	for id := range ps.producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	buf := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(ids)*snapshotMaxEntry)
	buf[0] = snapshotVersion
	binary.BigEndian.PutUint64(buf[5:], uint64(ps.end))
	binary.BigEndian.PutUint32(buf[13:], uint32(len(ids)))
	for _, id := range ids {
		e := ps.producers[id]
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.id))
		buf = binary.BigEndian.AppendUint16(buf, uint16(e.epoch))
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.lastTimestamp))
		buf = binary.BigEndian.AppendUint32(buf, uint32(e.coordinatorEpoch))
		txn, open := ps.txns[id]
		if !open {
			txn = -1
		}
		buf = binary.BigEndian.AppendUint64(buf, uint64(txn))
		buf = append(buf, byte(len(e.batches)))
		for _, b := range e.batches {
			buf = binary.BigEndian.AppendUint32(buf, uint32(b.firstSeq))
			buf = binary.BigEndian.AppendUint32(buf, uint32(b.lastSeq))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.firstOffset))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.lastOffset))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.maxTimestamp))
		}
	}
	binary.BigEndian.PutUint32(buf[1:], crc32.Checksum(buf[snapshotCRCFrom:], castagnoli))
	return buf
}

// decodeSnapshot parses a snapshot, checking its version, CRC, lengths
// and that its offset is want.
func decodeSnapshot(buf []byte, want int64) (*producerState, error) {
	if len(buf) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: snapshot of %d bytes", errBadSnapshot, len(buf))
	}
	version := buf[0]
	if version != snapshotVersion && version != 1 {
		return nil, fmt.Errorf("%w: version %d, want %d", errBadSnapshot, buf[0], snapshotVersion)
	}
	head, minBatches := snapshotEntryHead, 0
	if version == 1 {
		head, minBatches = snapshotEntryHeadV1, 1
	}
	if got, sum := binary.BigEndian.Uint32(buf[1:]), crc32.Checksum(buf[snapshotCRCFrom:], castagnoli); got != sum {
		return nil, fmt.Errorf("%w: crc %08x, computed %08x", errBadSnapshot, got, sum)
	}
	end := int64(binary.BigEndian.Uint64(buf[5:]))
	if end != want {
		return nil, fmt.Errorf("%w: holds offset %d, named %d", errBadSnapshot, end, want)
	}
	count := int(binary.BigEndian.Uint32(buf[13:]))
	ps := newProducerState(end)
	p := buf[snapshotHeaderSize:]
	prev := int64(-1) // ids ascend from 0
	for i := 0; i < count; i++ {
		if len(p) < head {
			return nil, fmt.Errorf("%w: entry %d of %d truncated", errBadSnapshot, i, count)
		}
		e := &producerEntry{
			id:               int64(binary.BigEndian.Uint64(p)),
			epoch:            int16(binary.BigEndian.Uint16(p[8:])),
			lastTimestamp:    int64(binary.BigEndian.Uint64(p[10:])),
			coordinatorEpoch: -1,
		}
		if version != 1 {
			e.coordinatorEpoch = int32(binary.BigEndian.Uint32(p[18:]))
			if txn := int64(binary.BigEndian.Uint64(p[22:])); txn >= 0 {
				if txn >= end {
					return nil, fmt.Errorf("%w: producer %d transaction at %d, past %d", errBadSnapshot, e.id, txn, end)
				}
				ps.txns[e.id] = txn
			}
		}
		nb := int(p[head-1])
		p = p[head:]
		if nb < minBatches || nb > ProducerWindow || len(p) < nb*snapshotBatchSize {
			return nil, fmt.Errorf("%w: producer %d with %d batches", errBadSnapshot, e.id, nb)
		}
		if e.id <= prev {
			return nil, fmt.Errorf("%w: producer id %d after %d", errBadSnapshot, e.id, prev)
		}
		prev = e.id
		e.batches = make([]batchMeta, nb, ProducerWindow)
		for j := range e.batches {
			e.batches[j] = batchMeta{
				firstSeq:     int32(binary.BigEndian.Uint32(p)),
				lastSeq:      int32(binary.BigEndian.Uint32(p[4:])),
				firstOffset:  int64(binary.BigEndian.Uint64(p[8:])),
				lastOffset:   int64(binary.BigEndian.Uint64(p[16:])),
				maxTimestamp: int64(binary.BigEndian.Uint64(p[24:])),
			}
			p = p[snapshotBatchSize:]
		}
		ps.producers[e.id] = e
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after %d entries", errBadSnapshot, len(p), count)
	}
	return ps, nil
}
