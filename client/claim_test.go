package client

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/quirelog/quire/record"
)

// A fetched batch claiming 2^31-1 records (a hostile or broken server),
// plain or compressed, is refused for its missing records before any
// room is reserved by its claim.
func TestConsumerDoesNotReserveByTheClaim(t *testing.T) {
	for _, codec := range []record.Codec{record.None, record.Gzip} {
		b := record.NewBuilder(codec)
		b.Append(1, []byte("k"), []byte("v"), nil)
		batch := b.Build()
		binary.BigEndian.PutUint32(batch[23:], math.MaxInt32-1) // last offset delta
		binary.BigEndian.PutUint32(batch[57:], math.MaxInt32)   // record count
		binary.BigEndian.PutUint32(batch[17:], record.CRC(batch))
		var k Consumer
		reserved := -1
		err := k.decode(&fetchResult{tp: topicPartition{topic: "t"}, data: batch},
			func(n int) { reserved = n }, func(*Record) bool { return true })
		if !errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("%v batch claiming 2^31-1 records with one: %v, want ErrCorrupt", codec, err)
		}
		if reserved != -1 {
			t.Fatalf("%v batch claiming 2^31-1 records: room reserved for %d", codec, reserved)
		}
	}
}
