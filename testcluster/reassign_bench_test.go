package testcluster_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// benchEnvInt is an int64 setting of a benchmark from the environment,
// def when unset.
func benchEnvInt(b *testing.B, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a number of MiB", name, v)
	}
	return n
}

// BenchmarkReassignMove moves a one-partition topic of replication
// factor 2 holding 16 MiB (QUIRE_BENCH_MOVE_MB) between brokers 1,2 and
// 3,4 of a 4-node in-process cluster, back and forth: an operation is
// one whole move (both new replicas created, caught up, in the ISR, the
// old ones deleted), and MB/s the partition's bytes over its time.
// Unthrottled, and with replica.reassignment.throttle.bytes.per.second
// at 8 MiB/s (QUIRE_BENCH_MOVE_THROTTLE_MB) on each broker: the ratio of
// the two is what the throttle costs a move (run them in the same
// invocation; absolute figures drift on a shared machine). For the time
// to move 1 GiB:
//
//	QUIRE_BENCH_MOVE_MB=1024 QUIRE_BENCH_MOVE_THROTTLE_MB=50 \
//	  go test ./testcluster/ -run '^$' -bench BenchmarkReassignMove -benchtime 1x
func BenchmarkReassignMove(b *testing.B) {
	size := benchEnvInt(b, "QUIRE_BENCH_MOVE_MB", 16) << 20
	throttle := benchEnvInt(b, "QUIRE_BENCH_MOVE_THROTTLE_MB", 8) << 20
	for _, throttle := range []int64{0, throttle} {
		b.Run(fmt.Sprintf("throttle=%d", throttle), func(b *testing.B) { benchReassignMove(b, size, throttle) })
	}
}

// moveBench is a 4-node cluster (3 voters) with a one-partition topic
// of replication factor 2, bench-move, to move between brokers.
type moveBench struct {
	b  *testing.B
	c  *testcluster.Cluster
	ad quirev1.AdminClient
}

func newMoveBench(b *testing.B) *moveBench {
	c := testcluster.New(b, 4, testcluster.Voters(3))
	ctx := context.Background()
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= metadata.MetadataVersionReassignment })
	m := &moveBench{b: b, c: c, ad: admin(c, 1)}
	if _, err := m.ad.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "bench-move",
		OptionalPartitions:        &quirev1.CreateTopicRequest_Partitions{Partitions: 1},
		OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 2}}); err != nil {
		b.Fatal(err)
	}
	return m
}

// start asks for the partition's move onto to.
func (m *moveBench) start(to []int32) {
	if _, err := m.ad.AlterPartitionReassignments(context.Background(), &quirev1.AlterPartitionReassignmentsRequest{
		Partitions: []*quirev1.ReassignmentTarget{{Topic: "bench-move", Partition: 0, Replicas: to}}}); err != nil {
		m.b.Fatal(err)
	}
}

// done reports whether the partition's move onto to has completed.
func (m *moveBench) done(img *metadata.Image, to []int32) bool {
	p, _ := img.Partition("bench-move", 0)
	return !p.Reassigning() && slices.Equal(p.Replicas, to) && len(p.ISR) == len(to)
}

func (m *moveBench) move(to []int32) {
	m.start(to)
	// A big move under a low throttle takes minutes: past the wait's
	// default bound.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	m.c.WaitImage(ctx, func(img *metadata.Image) bool { return m.done(img, to) })
}

// fill writes size bytes to the partition (acks=all, batches of 500
// records of 1,000 bytes).
func (m *moveBench) fill(size int64) {
	ctx := context.Background()
	leader, _ := m.c.WaitLeader(ctx, "bench-move", 0)
	bld := record.NewBuilder(record.None)
	value := make([]byte, 1000)
	for range 500 {
		bld.Append(1, nil, value, nil)
	}
	batch := bld.Build()
	pr := quirev1.NewProducerClient(m.c.Conn(leader))
	for written := int64(0); written < size; written += int64(len(batch)) {
		resp, err := pr.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1}, TimeoutMs: 30000,
			Partitions: []*quirev1.PartitionRecords{{Topic: "bench-move", Records: append([]byte(nil), batch...)}}})
		if err != nil {
			m.b.Fatal(err)
		}
		if e := resp.Partitions[0].Error; e != nil {
			m.b.Fatal(e.Message)
		}
	}
}

func (m *moveBench) throttle(bytesPerSecond int64) {
	if _, err := m.ad.SetReassignmentThrottle(context.Background(), &quirev1.SetReassignmentThrottleRequest{BytesPerSecond: bytesPerSecond}); err != nil {
		m.b.Fatal(err)
	}
}

func benchReassignMove(b *testing.B, size, throttle int64) {
	m := newMoveBench(b)
	pairs := [][]int32{{1, 2}, {3, 4}}
	m.move(pairs[0])
	m.fill(size)
	if throttle > 0 {
		m.throttle(throttle)
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		m.move(pairs[(i+1)%2])
	}
}

// BenchmarkReassignProduceP99 measures what a throttled move costs the
// producers of other partitions: acks=all produce (batches of 10
// 100-byte records, one at a time from each of 4 goroutines, one a
// partition) to a topic of 4 partitions of replication factor 3 on a
// 4-node cluster, while a partition of 128 MiB (QUIRE_BENCH_P99_MOVE_MB)
// moves between brokers 1,2 and 3,4 with the reassignment throttle at
// 10 MiB/s (QUIRE_BENCH_P99_THROTTLE_MB), against the same time with no
// move. An operation is one round: the move, then as long again without
// one, alternating, so both figures come from the same run on the same
// machine. It reports the produce latency's p50 and p99 of each (ms) and
// the ratio of the p99s.
func BenchmarkReassignProduceP99(b *testing.B) {
	size := benchEnvInt(b, "QUIRE_BENCH_P99_MOVE_MB", 128) << 20
	throttle := benchEnvInt(b, "QUIRE_BENCH_P99_THROTTLE_MB", 10) << 20
	m := newMoveBench(b)
	pairs := [][]int32{{1, 2}, {3, 4}}
	m.move(pairs[0])
	m.fill(size)
	m.throttle(throttle)
	ctx := context.Background()
	if _, err := m.ad.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "bench-other",
		OptionalPartitions:        &quirev1.CreateTopicRequest_Partitions{Partitions: 4},
		OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 3},
		Configs:                   map[string]string{"min.insync.replicas": "2"}}); err != nil {
		b.Fatal(err)
	}
	bld := record.NewBuilder(record.None)
	value := make([]byte, 100)
	for range 10 {
		bld.Append(1, nil, value, nil)
	}
	batch := bld.Build()

	// The load: each goroutine produces to its partition's leader, one
	// request at a time, and files each latency under the phase it
	// started in (a move's end ends its phase).
	var mu sync.Mutex
	moving := false
	var during, idle []time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range int32(4) {
		leader, _ := m.c.WaitLeader(ctx, "bench-other", p)
		pr := quirev1.NewProducerClient(m.c.Conn(leader))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				phase := moving
				mu.Unlock()
				start := time.Now()
				resp, err := pr.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1}, TimeoutMs: 30000,
					Partitions: []*quirev1.PartitionRecords{{Topic: "bench-other", Partition: p, Records: append([]byte(nil), batch...)}}})
				took := time.Since(start)
				if err == nil && resp.Partitions[0].Error != nil {
					err = fmt.Errorf("%s", resp.Partitions[0].Error.Message)
				}
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if phase {
					during = append(during, took)
				} else {
					idle = append(idle, took)
				}
				mu.Unlock()
			}
		})
	}
	setMoving := func(v bool) {
		mu.Lock()
		moving = v
		mu.Unlock()
	}
	// Warm up: a few seconds of load before the first figures.
	time.Sleep(2 * time.Second) // a benchmark's warm-up, not synchronisation
	mu.Lock()
	idle = idle[:0]
	mu.Unlock()
	b.ResetTimer()
	var moveTime time.Duration
	for i := range b.N {
		start := time.Now()
		setMoving(true)
		m.move(pairs[(i+1)%2])
		took := time.Since(start)
		moveTime += took
		setMoving(false)
		time.Sleep(took) // as long without a move: the baseline's window
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	pct := func(ds []time.Duration, q float64) float64 {
		if len(ds) == 0 {
			return -1
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(q*float64(len(s))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(idle, 0.5), "p50-idle-ms")
	b.ReportMetric(pct(during, 0.5), "p50-move-ms")
	b.ReportMetric(pct(idle, 0.99), "p99-idle-ms")
	b.ReportMetric(pct(during, 0.99), "p99-move-ms")
	b.ReportMetric(pct(during, 0.99)/pct(idle, 0.99), "p99-ratio")
	b.ReportMetric(float64(len(during)+len(idle)), "produces")
	b.ReportMetric(moveTime.Seconds()/float64(b.N), "s/move")
}
