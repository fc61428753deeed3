package record

import (
	"encoding/binary"
	"slices"
)

// BuildParts is Build without copying the records: it appends the
// batch's HeaderSize-byte header to hdr and returns it with the records
// section, so that header followed by body is exactly the batch Build
// returns (base offset 0, CRC set over both parts). body is the builder's
// own buffer (its compression buffer for a compressed codec): it stays
// valid and unchanged until the next Append, Build, BuildParts or Reset.
// Senders that can write a batch from several buffers (a gRPC codec
// returning a mem.BufferSlice, writev) save a copy of the records per
// batch.
func (b *Builder) BuildParts(hdr []byte) (header, body []byte) {
	codec := b.codec
	body = b.recs
	if codec != None {
		var err error
		if b.scratch, err = compress(b.scratch[:0], codec, b.recs); err == nil {
			body = b.scratch
		} else {
			codec = None // as Build: uncompressed is always valid
		}
	}
	start := len(hdr)
	hdr = slices.Grow(hdr, HeaderSize)[:start+HeaderSize]
	h := hdr[start:]
	b.fillHeader(h, codec)
	// fillHeader sized and checksummed the header alone: redo both for
	// header+body (the length field lies outside the CRC).
	binary.BigEndian.PutUint32(h[offBatchLength:], uint32(HeaderSize+len(body)-LengthPrefix))
	crc := crc32c(crc32c(0, h[offAttributes:]), body)
	binary.BigEndian.PutUint32(h[offCRC:], crc)
	return hdr, body
}

// SetProducerParts rewrites the producer id, epoch and base sequence of a
// batch held as BuildParts returned it (header, then the records section)
// and recomputes the CRC over both. body is only read.
func SetProducerParts(header, body []byte, id int64, epoch int16, baseSequence int32) {
	binary.BigEndian.PutUint64(header[offProducerID:], uint64(id))
	binary.BigEndian.PutUint16(header[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(header[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(header[offCRC:], crc32c(crc32c(0, header[offAttributes:HeaderSize]), body))
}
