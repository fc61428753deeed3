package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/testcluster"
)

// The per-key ordering test over a cluster: SHARED Subscribe streams
// with key_ordered, on every node, read a 3-partition topic (RF 3), each
// accepting every record it receives at once, while a member is cut, a
// partition's leader is killed and the controller is killed. Each
// member keeps a timestamped view: when each record was received and
// when its acceptance was sent, and whether it was confirmed.

// keyedDelivery is one delivery of a record to a member, as it saw it.
type keyedDelivery struct {
	member    int
	part      int32
	offset    int64
	key       string
	count     int32
	got, sent time.Time // received; its acceptance sent
	confirmed bool      // the acceptance was applied
}

type keyedLog struct {
	mu         sync.Mutex
	deliveries []*keyedDelivery
	confirmed  int
	errs       []string
}

func (l *keyedLog) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirmed
}

func (l *keyedLog) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// keyedMember runs one member: a SHARED key_ordered stream on node via,
// accepting each batch as it comes, until ctx ends or the stream breaks
// (its node killed). done is closed when it has stopped.
func keyedMember(ctx context.Context, c *testcluster.Cluster, via int32, member int, l *keyedLog) (cancel context.CancelFunc, done chan struct{}) {
	ctx, cancel = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() {
		defer close(done)
		stream, err := groups(c, via).Subscribe(ctx)
		if err != nil {
			return
		}
		start := &quirev1.SubscribeStart{Group: "kg", Subscription: &quirev1.GroupSubscription{Topics: []string{"kq"}},
			Mode: quirev1.SubscribeMode_SHARED, KeyOrdered: true, MaxOutstandingRecords: 8}
		if stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}) != nil {
			return
		}
		pending := map[int64][]*keyedDelivery{} // by ack id, one range a delivery
		var id int64
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			now := time.Now()
			switch {
			case resp.GetBatch() != nil:
				b := resp.GetBatch()
				acks := &quirev1.ShareAcks{}
				id++
				acks.Id = id
				var ds []*keyedDelivery
				for _, r := range b.Records {
					d := &keyedDelivery{member: member, part: b.Partition, offset: r.Offset, key: r.GetKey(), count: r.DeliveryCount, got: now}
					ds = append(ds, d)
					acks.Ranges = append(acks.Ranges, &quirev1.ShareAckRange{Topic: b.Topic, Partition: b.Partition,
						FirstOffset: r.Offset, LastOffset: r.Offset, Type: quirev1.ShareAckType_SHARE_ACCEPT})
					if want := fmt.Sprintf("kq-%d-", b.Partition); len(r.GetValue()) < len(want) || r.GetValue()[:len(want)] != want {
						l.fail("kq-%d@%d has value %q", b.Partition, r.Offset, r.GetValue())
					}
				}
				// Processing takes a moment, during which the keys are
				// held (this paces the members, it synchronises nothing).
				time.Sleep(2 * time.Millisecond)
				sent := time.Now()
				l.mu.Lock()
				for _, d := range ds {
					d.sent = sent
					l.deliveries = append(l.deliveries, d)
				}
				l.mu.Unlock()
				pending[id] = ds
				if stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_ShareAcks{ShareAcks: acks}}) != nil {
					return
				}
			case resp.GetShareAckResults() != nil:
				res := resp.GetShareAckResults()
				ds := pending[res.Id]
				delete(pending, res.Id)
				l.mu.Lock()
				for i, r := range res.Ranges {
					if r.Error == nil && i < len(ds) {
						ds[i].confirmed = true
						l.confirmed++
					}
				}
				l.mu.Unlock()
			}
		}
	}()
	return cancel, done
}

// keyedProducer writes three records to each partition of kq every few
// milliseconds, keyed over ten keys a partition, until stop; it answers
// each partition's log end offset once stopped.
func keyedProducer(ctx context.Context, c *testcluster.Cluster, stop <-chan struct{}) <-chan map[int32]int64 {
	out := make(chan map[int32]int64, 1)
	go func() {
		ends := map[int32]int64{}
		defer func() { out <- ends }()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			for p := range int32(3) {
				req := &quirev1.ProduceRecordsRequest{Topic: "kq", OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 5000}
				for i := range 3 {
					req.Records = append(req.Records, &quirev1.ProduceRecord{
						KeyData:           &quirev1.ProduceRecord_Key{Key: fmt.Sprintf("p%d-k%d", p, (3*n+i)%10)},
						ValueData:         &quirev1.ProduceRecord_Value{Value: fmt.Sprintf("kq-%d-%d-%d", p, n, i)},
						OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}})
				}
				// Until written, as a failover allows (a timed-out write
				// may be there twice: each copy is a record to deliver).
				_ = poll.Wait(ctx, func() error {
					running := c.Running()
					resp, err := quirev1.NewProducerClient(c.Conn(running[(n+int(p))%len(running)])).ProduceRecords(ctx, req)
					if err != nil {
						return err
					}
					for _, r := range resp.Results {
						if r.Error != nil {
							return fmt.Errorf("kq-%d: %s", p, r.Error.Message)
						}
						ends[p] = max(ends[p], r.Offset+1)
					}
					return nil
				})
			}
			time.Sleep(5 * time.Millisecond) // paces the writes
		}
	}()
	return out
}

// TestClusterShareKeyOrderedFailures: four key-ordered members of a
// share group, one or two on each node, read a 3-partition topic (RF 3)
// over SHARED Subscribe streams, which reach every partition's leader
// from whichever node they are on, while records are written. Meanwhile
// a member is cut (and replaced), the leader of a partition that is not
// the controller is killed (the members on it die with it and are
// replaced) and restarted, and then the controller is killed. From
// every member's timestamped view: no record whose acceptance was
// confirmed is delivered or accepted again; each key's accepted records
// were received in offset order; no two members ever held records of
// one key at once (a delivery held from its receipt to the sending of
// its confirmed acceptance); none reached the delivery limit (none was
// dead-lettered); and in the end every share-partition saved in the
// metadata log has finished every record up to the log's end, each
// delivered at least once: none lost.
func TestClusterShareKeyOrderedFailures(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupShareEnable = true
		cfg.ShareAutoOffsetReset = "earliest"
		cfg.GroupShareHeartbeatIntervalMs = 200
	}))
	// The streams and the writer live for the whole test, which at load
	// ~30 has taken more than 90 s (a failover, a restart and a
	// controller election, each seconds to tens of seconds): ctx only
	// stops a hang. Each wait for the cluster or for progress has its
	// own deadline (step).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	step := func() context.Context {
		sctx, cancel := context.WithTimeout(ctx, testcluster.WaitTimeout)
		t.Cleanup(cancel)
		return sctx
	}
	ctl := c.WaitController(step())
	createTopic(t, c, ctl, "kq", 3, 3)
	// Share-partitions are saved from metadata.version 15 on: below it a
	// new leader would start afresh.
	c.WaitImage(step(), func(img *metadata.Image) bool {
		_, ok := img.Topic("kq")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionShareState
	})
	for p := range int32(3) {
		c.WaitLeader(step(), "kq", p)
	}
	stopProducing := make(chan struct{})
	produced := keyedProducer(ctx, c, stopProducing)
	defer func() {
		select {
		case <-stopProducing:
		default:
			close(stopProducing)
			<-produced
		}
	}()

	l := &keyedLog{}
	type running struct {
		via    int32
		cancel context.CancelFunc
		done   chan struct{}
	}
	var members []running
	add := func(via int32) {
		cancel, done := keyedMember(ctx, c, via, len(members), l)
		members = append(members, running{via, cancel, done})
	}
	defer func() {
		for _, m := range members {
			m.cancel()
			<-m.done
		}
	}()
	nodes := c.Running()
	for i := range 4 {
		add(nodes[i%len(nodes)])
	}
	begin := time.Now()
	progress := func(n int, what string) {
		c.Eventually(step(), what, func() error {
			if got := l.accepted(); got < n {
				return fmt.Errorf("%d acceptances confirmed, want %d", got, n)
			}
			return nil
		})
		t.Logf("%v: %s", time.Since(begin).Round(time.Millisecond), what)
	}
	replaceOn := func(dead int32) {
		for i := range members {
			if members[i].via == dead {
				<-members[i].done
				add(c.Running()[i%len(c.Running())])
			}
		}
	}

	// A member is cut: its records go to the others at once.
	progress(100, "acceptances before a member is cut")
	members[0].cancel()
	<-members[0].done
	add(nodes[1])

	// The leader of a partition that is not the controller is killed.
	progress(300, "acceptances before a leader is killed")
	ctl = c.WaitController(step())
	victim := int32(-1)
	for p := range int32(3) {
		if leader, _ := c.WaitLeader(step(), "kq", p); leader != ctl {
			victim = leader
			break
		}
	}
	if victim < 0 {
		victim = nodes[0]
		if victim == ctl {
			victim = nodes[1]
		}
	}
	c.Kill(victim)
	t.Logf("killed node %d, a partition leader", victim)
	replaceOn(victim)
	progress(l.accepted()+200, "acceptances after the leader was killed")
	c.Restart(victim)
	t.Logf("%v: node %d restarted", time.Since(begin).Round(time.Millisecond), victim)

	// The controller is killed.
	progress(l.accepted()+100, "acceptances before the controller is killed")
	ctl = c.WaitController(step())
	c.Kill(ctl)
	t.Logf("killed node %d, the controller", ctl)
	replaceOn(ctl)
	progress(l.accepted()+200, "acceptances after the controller was killed")
	close(stopProducing)
	ends := <-produced

	live := c.Running()[0]
	var total int64
	for _, e := range ends {
		total += e
	}
	// The members drain what was written meanwhile, at whatever pace the
	// machine allows (at load ~30 some 3 acceptances a second, with
	// hundreds to go): each wait is for the saved starts to move on, and
	// fails only when one makes no progress within its deadline.
	moved := int64(-1)
	for finished := false; !finished; {
		c.Eventually(step(), "share-partitions saved in the metadata log moving on to every record finished", func() error {
			img := c.Image(live)
			var starts int64
			var unfinished error
			for p := range int32(3) {
				st, ok := img.ShareState(metadata.ShareKey{Group: "kg", Topic: "kq", Partition: p})
				if !ok {
					return fmt.Errorf("no saved state of kq-%d", p)
				}
				starts += st.Start
				if unfinished == nil && (st.Start != ends[p] || len(st.Runs) != 0) {
					unfinished = fmt.Errorf("kq-%d saved at start %d with %v, want every record of %d finished", p, st.Start, st.Runs, ends[p])
				}
			}
			if unfinished == nil {
				finished = true
				return nil
			}
			if starts > moved {
				moved = starts
				return nil
			}
			return unfinished
		})
	}
	for _, m := range members {
		m.cancel()
		<-m.done
	}
	members = nil
	t.Logf("%v: every share-partition finished", time.Since(begin).Round(time.Millisecond))
	l.check(t, ends)
	t.Logf("%d records, %d deliveries, %d acceptances confirmed", total, len(l.deliveries), l.confirmed)
}

// check judges the members' views (see the test).
func (l *keyedLog) check(t *testing.T, ends map[int32]int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		t.Error(e)
	}
	type rec struct {
		part   int32
		offset int64
	}
	byRecord := map[rec][]*keyedDelivery{}
	byKey := map[string][]*keyedDelivery{}
	all := map[string][]*keyedDelivery{}
	for _, d := range l.deliveries {
		all[fmt.Sprintf("%d/%s", d.part, d.key)] = append(all[fmt.Sprintf("%d/%s", d.part, d.key)], d)
		byRecord[rec{d.part, d.offset}] = append(byRecord[rec{d.part, d.offset}], d)
		if d.confirmed {
			byKey[fmt.Sprintf("%d/%s", d.part, d.key)] = append(byKey[fmt.Sprintf("%d/%s", d.part, d.key)], d)
		}
	}
	// Every record delivered; none accepted twice, none delivered after
	// its acceptance was confirmed (a delivery seen late has a lower
	// count), none as often as the delivery limit.
	for p, end := range ends {
		for off := range end {
			ds := byRecord[rec{p, off}]
			if len(ds) == 0 {
				t.Errorf("kq-%d@%d never delivered", p, off)
				continue
			}
			if len(ds) >= share.DefaultDeliveryCountLimit {
				t.Errorf("kq-%d@%d delivered %d times: it may have been dead-lettered", p, off, len(ds))
			}
			var acc *keyedDelivery
			for _, d := range ds {
				if !d.confirmed {
					continue
				}
				if acc != nil {
					t.Errorf("kq-%d@%d accepted twice: by member %d (count %d) and member %d (count %d)", p, off, acc.member, acc.count, d.member, d.count)
				}
				acc = d
			}
			for _, d := range ds {
				if acc != nil && d != acc && d.count >= acc.count {
					t.Errorf("kq-%d@%d delivered to member %d (count %d) after its acceptance at count %d by member %d", p, off, d.member, d.count, acc.count, acc.member)
				}
			}
		}
	}
	// Per key: the accepted records, in the order received, are in
	// offset order, and no two members' holds overlap.
	for key, ds := range byKey {
		bad := false
		errorf := func(format string, args ...any) {
			t.Helper()
			bad = true
			t.Errorf(format, args...)
		}
		slices.SortFunc(ds, func(a, b *keyedDelivery) int {
			if c := a.got.Compare(b.got); c != 0 {
				return c
			}
			return int(a.offset - b.offset)
		})
		for i := 1; i < len(ds); i++ {
			if ds[i].offset <= ds[i-1].offset {
				errorf("key %s: @%d (member %d) received after @%d (member %d)", key, ds[i].offset, ds[i].member, ds[i-1].offset, ds[i-1].member)
			}
		}
		for i, a := range ds {
			for _, b := range ds[i+1:] {
				if b.got.After(a.sent) {
					break // sorted by receipt: the later ones too
				}
				if a.member != b.member {
					errorf("key %s: member %d held @%d from %v to %v, member %d received @%d at %v",
						key, a.member, a.offset, a.got.Format(time.StampMicro), a.sent.Format(time.StampMicro), b.member, b.offset, b.got.Format(time.StampMicro))
				}
			}
		}
		if bad {
			// What each member saw of the key, to tell why.
			for _, d := range all[key] {
				t.Logf("key %s: member %d @%d count %d received %v acceptance sent %v confirmed %v", key, d.member, d.offset, d.count,
					d.got.Format(time.StampMicro), d.sent.Format(time.StampMicro), d.confirmed)
			}
		}
	}
}
