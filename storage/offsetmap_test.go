package storage

import (
	"fmt"
	"testing"
)

// The offset map keeps the latest offset of each key, refuses new keys
// once it holds its capacity (updates of known keys still go in), and
// never uses more memory than it was given.
func TestOffsetMapBounded(t *testing.T) {
	t.Parallel()
	for _, memBytes := range []int64{16 * offsetMapSlotBytes, 1000 * offsetMapSlotBytes, 50_000 * offsetMapSlotBytes} {
		m := newOffsetMap(memBytes)
		n := 0
		for ; ; n++ {
			if !m.put([]byte(fmt.Sprint("key-", n)), int64(n)) {
				break
			}
			if m.memory() > memBytes {
				t.Fatalf("%d bytes: map uses %d", memBytes, m.memory())
			}
		}
		if n != m.capacity() || n < int(float64(memBytes/offsetMapSlotBytes)*offsetMapLoadFactor)-1 {
			t.Fatalf("%d bytes: took %d keys, capacity %d", memBytes, n, m.capacity())
		}
		for i := 0; i < n; i++ {
			key := []byte(fmt.Sprint("key-", i))
			if !m.put(key, int64(n+i)) {
				t.Fatalf("%d bytes: update of key %d refused", memBytes, i)
			}
		}
		for i := 0; i < n; i++ {
			if got := m.get([]byte(fmt.Sprint("key-", i))); got != int64(n+i) {
				t.Fatalf("%d bytes: key %d maps to %d, want %d", memBytes, i, got, n+i)
			}
		}
		if got := m.get([]byte("absent")); got != -1 {
			t.Fatalf("absent key maps to %d", got)
		}
		m.reset()
		if got := m.get([]byte("key-0")); got != -1 || m.used != 0 {
			t.Fatalf("after reset: %d, %d used", got, m.used)
		}
	}
}
