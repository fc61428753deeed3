// Package record encodes and decodes Kafka RecordBatch v2 (magic 2), byte for
// byte, so that a batch can travel from producer to disk to follower to
// consumer without being re-encoded.
//
// It is a leaf package: it imports only the standard library and the
// compression codecs, so that storage, broker and the Go client can all
// use it. It is all Go: the CRC runs on every byte produced, on the leader
// and on each follower, and is hash/crc32's CRC-32C, which uses the CPU's
// CRC32 instructions where it has them; the record checks after it are
// the Go loops in batch.go.
//
// # Batch framing
//
// All integers are big endian. The CRC is CRC-32C (Castagnoli) over every
// byte from attributes (offset 21) to the end of the batch. batchLength
// counts the bytes after the batchLength field, so a whole batch is
// 12+batchLength bytes long.
//
//	offset  size  field
//	     0     8  baseOffset            first offset of the batch (set by the leader)
//	     8     4  batchLength           bytes that follow this field
//	    12     4  partitionLeaderEpoch  stamped by the leader, outside the CRC
//	    16     1  magic                 always 2
//	    17     4  crc                   CRC-32C of bytes [21, end)
//	    21     2  attributes            bits 0-2 codec (0 none, 1 gzip, 2 snappy,
//	                                    3 lz4, 4 zstd); bit 3 timestamp type
//	                                    (1 = LogAppendTime); bit 4 transactional;
//	                                    bit 5 control
//	    23     4  lastOffsetDelta       last offset - baseOffset
//	    27     8  baseTimestamp         timestamp of the first record
//	    35     8  maxTimestamp          largest timestamp in the batch
//	    43     8  producerId            -1 when not idempotent
//	    51     2  producerEpoch         -1 when not idempotent
//	    53     4  baseSequence          -1 when not idempotent
//	    57     4  recordCount           number of records that follow
//	    61     …  records               compressed as a whole when codec != 0
//
// # Record framing
//
// Records are packed one after another. varint and varlong are zigzag
// encoded base-128 varints (protobuf sint32/sint64, Go's binary.PutVarint).
// A length of -1 means null.
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused, 0
//	timestampDelta  varlong  timestamp - baseTimestamp
//	offsetDelta     varint   offset - baseOffset
//	keyLength       varint   -1 = null key
//	key             keyLength bytes
//	valueLength     varint   -1 = null value (tombstone)
//	value           valueLength bytes
//	headerCount     varint
//	headers         headerCount × (keyLength varint, key, valueLength varint, value)
//
// # Compression
//
// With a codec set, the records section (everything after byte 61) is one
// compressed stream: gzip (RFC 1952), snappy, lz4 (the LZ4 frame format, as
// Kafka writes it since magic 1) or zstd (a zstd frame). For snappy the
// decoder accepts both the xerial framing written by Kafka's Java producer
// (magic "\x82SNAPPY\x00", then length-prefixed blocks) and a plain snappy
// block; the encoder writes a plain snappy block, which Kafka's Java consumer
// also reads.
package record
