package share

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkShareAcquireAccept is four members taking 50 records at a time
// from a full window and accepting them, with and without per-key
// ordering (100 keys); one op is one record delivered and accepted.
func BenchmarkShareAcquireAccept(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("keyOrdering=%v", keyed), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.KeyOrdering = keyed
			p, err := New(cfg, 0)
			if err != nil {
				b.Fatal(err)
			}
			keys := make([][]byte, 100)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "key-%d", i)
			}
			members := []string{"a", "b", "c", "d"}
			now := time.Unix(0, 0)
			var recs []Record
			done := 0
			for i := 0; done < b.N; i++ {
				if room := p.Room(); room > 0 {
					recs = recs[:0]
					for o := p.End(); o < p.End()+int64(room); o++ {
						recs = append(recs, Record{Offset: o, Key: keys[o%int64(len(keys))]})
					}
					if _, err := p.Offer(recs, p.End()+int64(room)); err != nil {
						b.Fatal(err)
					}
				}
				m := members[i%len(members)]
				got, err := p.Acquire(now, m, 50)
				if err != nil {
					b.Fatal(err)
				}
				acks := make([]Ack, len(got))
				for j, r := range got {
					acks[j] = Ack{First: r.First, Last: r.Last, Type: Accept}
					done += int(r.Last - r.First + 1)
				}
				if err := p.Acknowledge(now, m, acks); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
