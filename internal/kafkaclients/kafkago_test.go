package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/internal/testparallel"
	"github.com/quirelog/quire/metadata"
)

func TestMain(m *testing.M) {
	testparallel.Raise()
	m.Run()
}

// partitions is the number of partitions of every topic made here.
const partitions = 4

// startBroker starts a dev node with a Kafka listener, topics made with
// four partitions, and returns the listener's address.
func startBroker(t *testing.T) string {
	t.Helper()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.NumPartitions = partitions
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	// A new cluster's group records wait for its metadata.version.
	brokertest.WaitMetadataVersion(t, b, metadata.LatestMetadataVersion)
	return addr
}

func kgoClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n records to topic (auto-created), spread over its
// partitions in turn; value i is "v<i>".
func produce(ctx context.Context, t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl := kgoClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// assignments is each member's partitions of group, once the group is
// stable with want members each holding partitions.
func stableAssignments(t *testing.T, cl *kgo.Client, group string, want int) map[string][]int32 {
	t.Helper()
	var got map[string][]int32
	poll.Until(t, fmt.Sprintf("group %s stable with %d members each assigned partitions", group, want), func() error {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			return err
		}
		g := resp.Groups[0]
		if g.State != "Stable" || len(g.Members) != want {
			return fmt.Errorf("state %s, %d members", g.State, len(g.Members))
		}
		got = map[string][]int32{}
		for _, m := range g.Members {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.MemberAssignment); err != nil {
				return fmt.Errorf("member %s: assignment: %v", m.MemberID, err)
			}
			for _, at := range a.Topics {
				got[m.MemberID] = append(got[m.MemberID], at.Partitions...)
			}
			slices.Sort(got[m.MemberID])
			if len(got[m.MemberID]) == 0 {
				return fmt.Errorf("member %s has no partitions yet", m.MemberID)
			}
		}
		return nil
	})
	return got
}

// newReader is a kafka-go group reader of topic, reading from the start.
func newReader(addr, group, topic string, balancers ...kafkago.GroupBalancer) *kafkago.Reader {
	return kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: []string{addr}, GroupID: group, Topic: topic, GroupBalancers: balancers,
		StartOffset: kafkago.FirstOffset, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		JoinGroupBackoff: 200 * time.Millisecond, ReadBackoffMax: 200 * time.Millisecond,
	})
}

// TestKafkaGoGroupReadersShareTopic: two segmentio/kafka-go group readers
// (the classic protocol as kafka-go speaks it: JoinGroup v1 with its
// subscription labelled v1 without owned partitions, OffsetFetch v1,
// OffsetCommit v2) join one group, share the topic's partitions as their
// balancer names (range: contiguous; roundrobin: dealt in turn), and read
// every record once between them, committing as they go; a third reader
// of the group afterwards finds everything committed.
func TestKafkaGoGroupReadersShareTopic(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	admin := kgoClient(t, addr)
	for _, tc := range []struct {
		name      string
		balancers []kafkago.GroupBalancer
		split     [][]int32 // the members' partitions, in either order
	}{
		// kafka-go's default balancers, range first.
		{"range", nil, [][]int32{{0, 1}, {2, 3}}},
		{"roundrobin", []kafkago.GroupBalancer{kafkago.RoundRobinGroupBalancer{}}, [][]int32{{0, 2}, {1, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			topic, group := "kg-"+tc.name, "g-"+tc.name
			// The topic, before the readers ask for it.
			poll.Until(t, "topic "+topic+" made and led", func() error { return topicLed(admin, topic) })

			readers := []*kafkago.Reader{newReader(addr, group, topic, tc.balancers...), newReader(addr, group, topic, tc.balancers...)}
			type read struct {
				reader int
				msg    kafkago.Message
			}
			got := make(chan read, 1024)
			var wg sync.WaitGroup
			rctx, stop := context.WithCancel(ctx)
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
							// kafka-go passes on the errors of its group
							// calls and goes on.
							t.Logf("reader %d: %v", i, err)
							continue
						}
						got <- read{i, m}
					}
				}()
			}
			defer func() {
				stop()
				wg.Wait()
				for _, r := range readers {
					_ = r.Close()
				}
			}()

			split := stableAssignments(t, admin, group, 2)
			var parts [][]int32
			for _, ps := range split {
				parts = append(parts, ps)
			}
			slices.SortFunc(parts, slices.Compare)
			if fmt.Sprint(parts) != fmt.Sprint(tc.split) {
				t.Fatalf("%s split the partitions %v, want %v", tc.name, parts, tc.split)
			}

			const n = 200
			produce(ctx, t, addr, topic, n)
			seen := map[string]int{}
			perReader := [2]int{}
			for len(seen) < n {
				select {
				case r := <-got:
					key := fmt.Sprintf("%d/%d", r.msg.Partition, r.msg.Offset)
					if seen[key]++; seen[key] > 1 {
						t.Fatalf("record %s (%s) read twice", key, r.msg.Value)
					}
					perReader[r.reader]++
				case <-ctx.Done():
					t.Fatalf("read %d of %d records", len(seen), n)
				}
			}
			if perReader[0] == 0 || perReader[1] == 0 {
				t.Fatalf("records read by each reader: %v; want both to read", perReader)
			}

			// Every record was committed: a new member of the group, alone
			// once the others leave, has nothing to read at the end.
			stop()
			wg.Wait()
			for _, r := range readers {
				if err := r.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}
			committed := kmsg.NewPtrOffsetFetchRequest()
			committed.Group = group
			poll.Until(t, "every partition committed at its end", func() error {
				resp, err := committed.RequestWith(ctx, admin)
				if err != nil {
					return err
				}
				sum := int64(0)
				for _, rt := range resp.Topics {
					for _, p := range rt.Partitions {
						sum += p.Offset
					}
				}
				if sum != n {
					return fmt.Errorf("committed offsets sum to %d, want %d", sum, n)
				}
				return nil
			})
		})
	}
}

// topicLed is nil once every partition of topic, auto-created, has a
// leader.
func topicLed(cl *kgo.Client, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
		return fmt.Errorf("topic %s: %+v", topic, resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return fmt.Errorf("partition %d: error %d leader %d", p.Partition, p.ErrorCode, p.Leader)
		}
	}
	return nil
}

// TestKafkaGoClientFetch: kafka-go's Client.Fetch, which asks for no
// fetch session (id -1, epoch -1), reads the records.
func TestKafkaGoClientFetch(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce(ctx, t, addr, "kg-fetch", 8)
	c := &kafkago.Client{Addr: kafkago.TCP(addr), Timeout: 30 * time.Second}
	resp, err := c.Fetch(ctx, &kafkago.FetchRequest{Topic: "kg-fetch", Partition: 1, Offset: 0, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if resp.Error != nil {
		t.Fatalf("fetch answered %v", resp.Error)
	}
	var values []string
	for {
		r, err := resp.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read record: %v", err)
		}
		b := make([]byte, r.Value.Len())
		_, _ = r.Value.Read(b)
		values = append(values, string(b))
	}
	if fmt.Sprint(values) != "[v1 v5]" {
		t.Fatalf("partition 1 read %v, want [v1 v5]", values)
	}
}
