package record

import (
	"bytes"
	"testing"
)

func tmpBatch() []byte {
	bl := NewBuilder(None)
	v := bytes.Repeat([]byte("x"), 100)
	for i := 0; i < 1000; i++ {
		bl.Append(int64(1700000000000+i), nil, v, nil)
	}
	return bl.Build()
}

func BenchmarkTmpCRC(b *testing.B) {
	batch := tmpBatch()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		CRC(batch)
	}
}

func BenchmarkTmpFraming(b *testing.B) {
	batch := tmpBatch()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if err := checkFraming(batch[HeaderSize:], 1000); err != nil {
			b.Fatal(err)
		}
	}
}

func checkFraming2(body []byte, n int32) error {
	p := 0
	for i := int32(0); i < n; i++ {
		var length int
		if p+1 < len(body) {
			w := uint(body[p]) | uint(body[p+1])<<8
			if w&0x80 == 0 {
				if w&1 != 0 {
					return errBad
				}
				length = int(w&0x7f)>>1 + 1
			} else if w&0x8000 == 0 {
				u := w&0x7f | (w>>8)<<7
				if u&1 != 0 {
					return errBad
				}
				length = int(u>>1) + 2
			} else {
				return errBad
			}
		} else {
			return errBad
		}
		p += length
	}
	if p != len(body) {
		return errBad
	}
	return nil
}

var errBad = ErrBadRecord

func BenchmarkTmpFraming2(b *testing.B) {
	batch := tmpBatch()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if err := checkFraming2(batch[HeaderSize:], 1000); err != nil {
			b.Fatal(err)
		}
	}
}
