package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxDecompressedSize bounds the records section of a compressed batch once
// decompressed, so a small hostile batch cannot exhaust memory.
const MaxDecompressedSize = 256 << 20

// maxDecompressed is MaxDecompressedSize; tests lower it.
var maxDecompressed = MaxDecompressedSize

// decompressSlots bounds how many batches are decompressed at once. Each
// may take up to MaxDecompressedSize, so without it a burst of small
// hostile batches (a few KB that expand 1000-fold) on many connections
// could take that many times the memory; with it, at most this many.
// Decompression is CPU work: more at once than cores gains nothing.
var decompressSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// decompressWaitHook, if set (tests), runs when a decompression waits for
// a slot.
var decompressWaitHook func()

func acquireDecompress() {
	select {
	case decompressSlots <- struct{}{}:
		return
	default:
	}
	if decompressWaitHook != nil {
		decompressWaitHook()
	}
	decompressSlots <- struct{}{}
}

func releaseDecompress() { <-decompressSlots }

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 16<<20 {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

var (
	gzipReaders sync.Pool
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	lz4Writers  = sync.Pool{New: func() any {
		// 64 KiB blocks, as Kafka's Java producer writes them; the
		// default 4 MiB blocks make every batch allocate megabytes.
		w := lz4.NewWriter(nil)
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}}

	zstdOnce sync.Once
	zstdDec  *zstd.Decoder
	zstdEnc  *zstd.Encoder
)

func zstdCodecs() (*zstd.Decoder, *zstd.Encoder) {
	zstdOnce.Do(func() {
		var err error
		zstdDec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(MaxDecompressedSize), zstd.WithDecoderLowmem(true))
		if err != nil {
			panic(err) // only on invalid options
		}
		zstdEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(err)
		}
	})
	return zstdDec, zstdEnc
}

// xerialMagic starts a snappy stream framed the way snappy-java's
// SnappyOutputStream (Kafka's Java producer) writes it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the decompressed records section in a pooled buffer.
func decompress(c Codec, src []byte) (*[]byte, error) {
	buf := getBuf()
	out, err := decompressTo((*buf)[:0], c, src)
	if err != nil {
		putBuf(buf)
		return nil, err
	}
	*buf = out
	return buf, nil
}

func decompressTo(dst []byte, c Codec, src []byte) ([]byte, error) {
	switch c {
	case Gzip:
		var zr *gzip.Reader
		if v := gzipReaders.Get(); v != nil {
			zr = v.(*gzip.Reader)
			if err := zr.Reset(bytes.NewReader(src)); err != nil {
				return nil, fmt.Errorf("%w: gzip: %v", ErrDecompress, err)
			}
		} else {
			var err error
			if zr, err = gzip.NewReader(bytes.NewReader(src)); err != nil {
				return nil, fmt.Errorf("%w: gzip: %v", ErrDecompress, err)
			}
		}
		defer gzipReaders.Put(zr)
		return readAllLimited(dst, zr, "gzip")
	case LZ4:
		zr := lz4Readers.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(src))
		defer lz4Readers.Put(zr)
		return readAllLimited(dst, zr, "lz4")
	case Zstd:
		dec, _ := zstdCodecs()
		out, err := dec.DecodeAll(src, dst)
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrDecompress, err)
		}
		return out, nil
	case Snappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return decodeXerial(dst, src)
		}
		return decodeSnappyBlock(dst, src)
	case None:
		return append(dst, src...), nil
	}
	return nil, fmt.Errorf("%w: %d", ErrBadCodec, c)
}

// readAllLimited appends everything r yields to dst, failing once that is
// more than MaxDecompressedSize bytes. The limit is exact whatever the
// capacity dst starts with (the pooled buffers vary), so a batch is
// accepted or refused the same way every time.
func readAllLimited(dst []byte, r io.Reader, name string) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		room := dst[len(dst):cap(dst)]
		if left := maxDecompressed + 1 - (len(dst) - start); len(room) > left {
			room = room[:left]
		}
		n, err := r.Read(room)
		dst = dst[:len(dst)+n]
		if len(dst)-start > maxDecompressed {
			return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrDecompress, name, maxDecompressed)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrDecompress, name, err)
		}
	}
}

func decodeSnappyBlock(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil || n > maxDecompressed {
		return nil, fmt.Errorf("%w: snappy: bad length", ErrDecompress)
	}
	start := len(dst)
	dst = grow(dst, n)
	out, err := s2.Decode(dst[start:start+n], src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrDecompress, err)
	}
	return dst[:start+len(out)], nil
}

// decodeXerial decodes snappy-java framing: 8 magic bytes, int32 version,
// int32 min compatible version, then blocks of int32 length + snappy block.
func decodeXerial(dst, src []byte) ([]byte, error) {
	if len(src) < 16 {
		return nil, fmt.Errorf("%w: snappy: short xerial header", ErrDecompress)
	}
	src = src[16:]
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, fmt.Errorf("%w: snappy: short xerial block", ErrDecompress)
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, fmt.Errorf("%w: snappy: xerial block past end", ErrDecompress)
		}
		var err error
		if dst, err = decodeSnappyBlock(dst, src[:n]); err != nil {
			return nil, err
		}
		if len(dst) > maxDecompressed {
			return nil, fmt.Errorf("%w: snappy: more than %d bytes", ErrDecompress, maxDecompressed)
		}
		src = src[n:]
	}
	return dst, nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, len(b)+n+len(b)/4)
	copy(nb, b)
	return nb
}

// compress appends the compressed form of src to dst.
func compress(dst []byte, c Codec, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		bb := bytes.NewBuffer(dst)
		w.Reset(bb)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return bb.Bytes(), nil
	case Snappy:
		start := len(dst)
		dst = grow(dst, s2.MaxEncodedLen(len(src)))
		out := s2.EncodeSnappy(dst[start:], src)
		return dst[:start+len(out)], nil
	case LZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		bb := bytes.NewBuffer(dst)
		w.Reset(bb)
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return bb.Bytes(), nil
	case Zstd:
		_, enc := zstdCodecs()
		return enc.EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("%w: %d", ErrBadCodec, c)
}
