package kafkagoe2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// TestKafkaGoGroupE2E: two kafka-go group readers join group
// QUIRE_KAFKAGO_GROUP on topic QUIRE_KAFKAGO_TOPIC (made by the script,
// QUIRE_KAFKAGO_PARTITIONS partitions, empty) at the node's Kafka
// listener QUIRE_KAFKAGO_ADDR. Once the group is stable with both
// holding partitions, a kafka-go writer writes QUIRE_KAFKAGO_PER_PARTITION
// records to each partition ("p<P>-<i>"); the readers read every one of
// them once between them, both reading, and commit each as they read
// (ReadMessage), then leave. The script checks the commits with quire.
func TestKafkaGoGroupE2E(t *testing.T) {
	addr := os.Getenv("QUIRE_KAFKAGO_ADDR")
	if addr == "" {
		t.Skip("run by scripts/e2e_kafka.sh, which sets QUIRE_KAFKAGO_ADDR to a node's Kafka listener")
	}
	topic, group := os.Getenv("QUIRE_KAFKAGO_TOPIC"), os.Getenv("QUIRE_KAFKAGO_GROUP")
	parts, err1 := strconv.Atoi(os.Getenv("QUIRE_KAFKAGO_PARTITIONS"))
	per, err2 := strconv.Atoi(os.Getenv("QUIRE_KAFKAGO_PER_PARTITION"))
	if topic == "" || group == "" || err1 != nil || err2 != nil || parts < 2 || per < 1 {
		t.Fatalf("QUIRE_KAFKAGO_TOPIC %q, _GROUP %q, _PARTITIONS (%v) and _PER_PARTITION (%v) must be set", topic, group, err1, err2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	newReader := func() *kafkago.Reader {
		return kafkago.NewReader(kafkago.ReaderConfig{
			Brokers: []string{addr}, GroupID: group, Topic: topic, StartOffset: kafkago.FirstOffset,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
			HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
			JoinGroupBackoff: 200 * time.Millisecond, ReadBackoffMax: 200 * time.Millisecond,
		})
	}
	readers := []*kafkago.Reader{newReader(), newReader()}
	type read struct {
		reader int
		msg    kafkago.Message
	}
	got := make(chan read, 1024)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := r.ReadMessage(rctx) // commits m before it returns
				if rctx.Err() != nil {
					return
				}
				if err != nil {
					t.Logf("reader %d: %v", i, err) // passed on by kafka-go, which goes on
					continue
				}
				got <- read{i, m}
			}
		}()
	}
	closeAll := func() {
		stop()
		wg.Wait()
		for i, r := range readers {
			if err := r.Close(); err != nil {
				t.Errorf("reader %d: close: %v", i, err)
			}
		}
		readers = nil
	}
	defer func() {
		if readers != nil {
			closeAll()
		}
	}()

	// The group stable, both members holding partitions, before anything
	// is written: no record is read across a rebalance.
	client := &kafkago.Client{Addr: kafkago.TCP(addr), Timeout: 10 * time.Second}
	last := ""
	for {
		d, err := client.DescribeGroups(ctx, &kafkago.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(d.Groups) == 1 {
			g := d.Groups[0]
			held := 0
			for _, m := range g.Members {
				for _, mt := range m.MemberAssignments.Topics {
					if len(mt.Partitions) > 0 {
						held++
						break
					}
				}
			}
			if g.GroupState == "Stable" && len(g.Members) == 2 && held == 2 {
				t.Logf("group %s stable: %+v", group, g.Members)
				break
			}
			last = fmt.Sprintf("state %s, %d members, %d holding partitions", g.GroupState, len(g.Members), held)
		} else {
			last = fmt.Sprint(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s not stable with two members: %s", group, last)
		case <-time.After(100 * time.Millisecond):
		}
	}

	w := &kafkago.Writer{Addr: kafkago.TCP(addr), Topic: topic, RequiredAcks: kafkago.RequireAll, BatchTimeout: 10 * time.Millisecond,
		Balancer: kafkago.BalancerFunc(func(m kafkago.Message, _ ...int) int { return m.Partition })}
	defer w.Close()
	var msgs []kafkago.Message
	for p := range parts {
		for i := 1; i <= per; i++ {
			msgs = append(msgs, kafkago.Message{Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}

	seen := map[string]bool{}
	perReader := [2]int{}
	for len(seen) < len(msgs) {
		select {
		case r := <-got:
			v := string(r.msg.Value)
			if want := fmt.Sprintf("p%d-", r.msg.Partition); len(v) < len(want) || v[:len(want)] != want {
				t.Fatalf("partition %d offset %d holds %q", r.msg.Partition, r.msg.Offset, v)
			}
			if seen[v] {
				t.Fatalf("record %s (partition %d offset %d) read twice", v, r.msg.Partition, r.msg.Offset)
			}
			seen[v] = true
			perReader[r.reader]++
		case <-ctx.Done():
			t.Fatalf("read %d of %d records", len(seen), len(msgs))
		}
	}
	closeAll()
	if perReader[0] == 0 || perReader[1] == 0 {
		t.Fatalf("records read by each reader %v: want both to read", perReader)
	}
	fmt.Printf("kafka-go: %d records read once by two readers (%d and %d), committed\n", len(seen), perReader[0], perReader[1])
}
