package partitioner

import (
	"strconv"
	"sync"
	"testing"
)

// Vectors from Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/
// apache/kafka/common/utils/UtilsTest.java).
var kafkaMurmur2Vectors = []struct {
	in   string
	want int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
}

func TestPartitionerMurmur2KafkaVectors(t *testing.T) {
	for _, c := range kafkaMurmur2Vectors {
		if got := Murmur2([]byte(c.in)); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPartitionerKeyPartitionMatchesKafka(t *testing.T) {
	// Expected partitions follow from the vectors above with Kafka's
	// toPositive(h) % n (h & 0x7fffffff, not abs).
	for _, c := range kafkaMurmur2Vectors {
		for _, n := range []int32{1, 3, 7, 12, 100} {
			want := (c.want & 0x7fffffff) % n
			if got := KeyPartition([]byte(c.in), n); got != want {
				t.Errorf("KeyPartition(%q, %d) = %d, want %d", c.in, n, got, want)
			}
		}
	}
	// Worked by hand: "foobar" -> -790332482 -> & 0x7fffffff = 1357151166.
	if got := KeyPartition([]byte("foobar"), 10); got != 1357151166%10 {
		t.Fatalf("KeyPartition(foobar, 10) = %d", got)
	}
	if got := KeyPartition([]byte("x"), 0); got != 0 {
		t.Fatalf("KeyPartition with no partitions = %d, want 0", got)
	}
}

func TestPartitionerToPositive(t *testing.T) {
	for in, want := range map[int32]int32{0: 0, 5: 5, -1: 0x7fffffff, -2147483648: 0} {
		if got := ToPositive(in); got != want {
			t.Errorf("ToPositive(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestPartitionerKeyPartitionInRange(t *testing.T) {
	for i := 0; i < 10000; i++ {
		k := []byte("key-" + strconv.Itoa(i))
		p := KeyPartition(k, 7)
		if p < 0 || p >= 7 {
			t.Fatalf("partition %d out of range for %q", p, k)
		}
		if p != KeyPartition(k, 7) {
			t.Fatalf("unstable partition for %q", k)
		}
	}
}

func TestPartitionerStickySwitchesAfterBytes(t *testing.T) {
	s := NewSticky(1000)
	first := s.Partition("t", 4, 100)
	for i := 1; i < 10; i++ { // 10 records of 100 bytes fill the 1000
		if p := s.Partition("t", 4, 100); p != first {
			t.Fatalf("record %d moved to %d before the batch filled (stuck on %d)", i, p, first)
		}
	}
	if p := s.Partition("t", 4, 100); p == first {
		t.Fatalf("still on %d after %d bytes", p, 1000)
	}
	if p := s.Partition("single", 1, 100); p != 0 {
		t.Fatalf("one partition topic got %d", p)
	}
	// A shrinking partition count never yields an out-of-range choice.
	for i := 0; i < 100; i++ {
		if p := s.Partition("t", 2, 500); p < 0 || p >= 2 {
			t.Fatalf("partition %d out of range", p)
		}
	}
}

func TestPartitionerStickySpreadsAndIsConcurrencySafe(t *testing.T) {
	s := NewSticky(100)
	var mu sync.Mutex
	seen := map[int32]int{}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				p := s.Partition("t", 5, 50)
				mu.Lock()
				seen[p]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 5 {
		t.Fatalf("sticky used %d of 5 partitions: %v", len(seen), seen)
	}
}

func BenchmarkPartitionerMurmur2(b *testing.B) {
	key := []byte("a-little-bit-longer-string")
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		Murmur2(key)
	}
}
