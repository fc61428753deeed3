package request_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

// The core is tested over a real replica manager and log in a temporary
// directory, on node 1, with topic "t": partition 0 led here, partition 1
// and 2 led by node 2, partition 3 by node 3. Its metadata, other brokers
// and ACLs are fakes.

const self = 1

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type noController struct{}

func (noController) AlterPartition(_ context.Context, _ string, _ int32, a replica.Assignment) (replica.Assignment, error) {
	return a, replica.ErrISRRefused
}

type allRegistered struct{}

func (allRegistered) Registration(int32) (replica.Registration, bool) {
	return replica.Registration{}, true
}

type noPeers struct{}

func (noPeers) ReplicaFetch(context.Context, int32, *replica.FetchRequest) (*replica.FetchResponse, error) {
	return nil, errors.New("no network in this test")
}

// cluster is the metadata: topic "t" and its leaders.
type cluster struct{ lost bool }

func (c cluster) Topic(name string) (metadata.TopicInfo, bool) {
	if name != "t" {
		return metadata.TopicInfo{}, false
	}
	// t takes share groups' dead letters (the share tests write them to
	// t itself).
	return metadata.TopicInfo{Name: "t", Configs: map[string]string{request.DeadLetterGroupEnable: "true"}, Partitions: []metadata.PartitionInfo{
		{Topic: "t", Partition: 0, Leader: self, LeaderEpoch: 1, Replicas: []int32{self}, ISR: []int32{self}},
		{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 5, Replicas: []int32{2}, ISR: []int32{2}},
		{Topic: "t", Partition: 2, Leader: 2, LeaderEpoch: 5, Replicas: []int32{2}, ISR: []int32{2}},
		{Topic: "t", Partition: 3, Leader: 3, LeaderEpoch: 7, Replicas: []int32{3}, ISR: []int32{3}},
	}}, true
}
func (c cluster) Topics() []metadata.TopicInfo {
	t, _ := c.Topic("t")
	return []metadata.TopicInfo{t}
}

func (c cluster) Broker(id int32) (metadata.BrokerInfo, bool) {
	return metadata.BrokerInfo{ID: id, Addr: "broker-" + string(rune('0'+id))}, id >= 1 && id <= 3
}

func (c cluster) SessionLost() bool                  { return c.lost }
func (c cluster) SessionDeadline() (time.Time, bool) { return time.Time{}, false }

// forwarder records the calls passed on; leader 3 cannot be reached.
type forwarder struct {
	mu       sync.Mutex
	produces map[int32][]*request.ProduceRequest
	fetches  map[int32][]*request.FetchRequest
	deletes  map[int32][][]request.DeleteRecordsPartition
	markers  map[int32][]request.TxnMarker
}

// WriteTxnMarkers records the markers passed on and takes them all.
func (f *forwarder) WriteTxnMarkers(_ context.Context, leader int32, markers []request.TxnMarker) ([][]error, error) {
	if leader == 3 {
		return nil, request.ErrLeaderUnreachable
	}
	f.mu.Lock()
	if f.markers == nil {
		f.markers = map[int32][]request.TxnMarker{}
	}
	f.markers[leader] = append(f.markers[leader], markers...)
	f.mu.Unlock()
	out := make([][]error, len(markers))
	for i, m := range markers {
		out[i] = make([]error, len(m.Partitions))
	}
	return out, nil
}

func (f *forwarder) Produce(_ context.Context, leader int32, req *request.ProduceRequest) ([]request.ProduceResult, error) {
	if leader == 3 {
		return nil, request.ErrLeaderUnreachable
	}
	f.mu.Lock()
	f.produces[leader] = append(f.produces[leader], req)
	f.mu.Unlock()
	out := make([]request.ProduceResult, len(req.Partitions))
	for i, p := range req.Partitions {
		out[i] = request.ProduceResult{Topic: p.Topic, Partition: p.Partition, BaseOffset: 100 * int64(p.Partition), LastOffset: 100*int64(p.Partition) + 1,
			LogAppendTime: -1, LogStartOffset: 0}
	}
	return out, nil
}

// Fetch answers leader 2's partitions with a batch of one record at the
// offset asked.
func (f *forwarder) Fetch(_ context.Context, leader int32, req *request.FetchRequest) ([]request.FetchResult, error) {
	if leader == 3 {
		return nil, request.ErrLeaderUnreachable
	}
	f.mu.Lock()
	f.fetches[leader] = append(f.fetches[leader], req)
	f.mu.Unlock()
	out := make([]request.FetchResult, len(req.Partitions))
	for i, p := range req.Partitions {
		out[i] = request.FetchResult{FetchPartition: p, Records: batch(1), HighWatermark: p.Offset + 1, LogEndOffset: p.Offset + 1}
	}
	return out, nil
}

func (f *forwarder) DeleteRecords(_ context.Context, leader int32, _ time.Duration, parts []request.DeleteRecordsPartition) ([]request.DeleteRecordsResult, error) {
	f.mu.Lock()
	f.deletes[leader] = append(f.deletes[leader], parts)
	f.mu.Unlock()
	out := make([]request.DeleteRecordsResult, len(parts))
	for i, p := range parts {
		out[i] = request.DeleteRecordsResult{Topic: p.Topic, Partition: p.Partition, LowWatermark: p.Offset}
	}
	return out, nil
}

// acls allows User:alice what it lists, by operation and topic, and
// nobody anything else.
type acls map[auth.Operation]map[string]bool

func (a acls) Authorize(r auth.Request) bool {
	return r.Principal == "User:alice" && a[r.Operation][r.ResourceName]
}

func (a acls) AuthorizeAny(principal string, op auth.Operation, _ auth.ResourceType) bool {
	return principal == "User:alice" && len(a[op]) > 0
}

// codes is a small table of codes: the quire.v1 numbers of the errors
// these tests meet.
func codes(err error) int32 {
	switch {
	case errors.Is(err, replica.ErrNotLeader):
		return 6
	case errors.Is(err, replica.ErrUnknownTopicOrPartition):
		return 3
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return 1
	case errors.Is(err, request.ErrInvalidRequiredAcks):
		return 21
	case errors.Is(err, request.ErrTopicAuthorizationFailed):
		return 29
	case errors.Is(err, replica.ErrInvalidRequest):
		return 42
	case errors.Is(err, replica.ErrLeaderNotAvailable):
		return 5
	case errors.Is(err, metadata.ErrUnknownTopic):
		return 3
	case errors.Is(err, metadata.ErrInvalidReassignment):
		return 39
	case errors.Is(err, metadata.ErrNoReassignmentInProgress):
		return 85
	}
	return -1
}

type fixture struct {
	core *request.Core
	fwd  *forwarder
}

func newCore(t *testing.T, mod func(*request.Config)) fixture {
	t.Helper()
	sm, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	rm, err := replica.New(replica.Config{NodeID: self, Logs: sm, Controller: noController{}, Brokers: allRegistered{}, Peers: noPeers{},
		Fetch: replica.FetchConfig{MaxWait: 500 * time.Millisecond, Backoff: time.Hour}, MaxFetchResponseBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rm.Stop)
	rm.Reconcile(replica.View{Registered: true, Topics: []replica.TopicView{{Name: "t", ID: "id-t",
		Config:     replica.TopicConfig{Log: storage.DefaultLogConfig(), MinInsyncReplicas: 1},
		Partitions: []replica.Assignment{{Partition: 0, Leader: self, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{self}, ISR: []int32{self}}}}}})
	fwd := &forwarder{produces: map[int32][]*request.ProduceRequest{}, fetches: map[int32][]*request.FetchRequest{}, deletes: map[int32][][]request.DeleteRecordsPartition{}}
	cfg := request.Config{NodeID: self, Replicas: rm, Cluster: cluster{}, Forwarder: fwd, Codes: codes, Checkpoint: sm.Checkpoint}
	if mod != nil {
		mod(&cfg)
	}
	c, err := request.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{core: c, fwd: fwd}
}

func batch(n int) []byte {
	b := record.NewBuilder(record.None)
	for i := range n {
		b.Append(1000, nil, []byte{byte(i)}, nil)
	}
	return b.Build()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// code is err's code, checking that it is an *request.Error.
func code(t *testing.T, err error) int32 {
	t.Helper()
	if err == nil {
		return 0
	}
	var e *request.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T) is not a *request.Error", err, err)
	}
	return e.Code
}

// A produce is appended, read back byte for byte by a fetch, and seen
// by ListOffsets; DeleteRecords moves the log start.
func TestCoreProduceFetchOffsetsDelete(t *testing.T) {
	t.Parallel()
	f := newCore(t, nil)
	ctx := ctxT(t)
	b1, b2 := batch(3), batch(2)
	for i, b := range [][]byte{b1, b2} {
		out, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: b}}})
		if err != nil || len(out) != 1 || out[0].Err != nil {
			t.Fatalf("produce %d: %v %+v", i, err, out)
		}
		if want := []int64{0, 3}[i]; out[0].BaseOffset != want {
			t.Fatalf("produce %d at %d, want %d", i, out[0].BaseOffset, want)
		}
	}
	res, err := f.core.Fetch(ctx, &request.FetchRequest{Partitions: []request.FetchPartition{{Topic: "t", Partition: 0, Offset: 0}}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("fetch: %v %+v", err, res)
	}
	if res[0].HighWatermark != 5 || res[0].LogEndOffset != 5 || res[0].LogStartOffset != 0 {
		t.Fatalf("fetch: hw %d leo %d start %d, want 5 5 0", res[0].HighWatermark, res[0].LogEndOffset, res[0].LogStartOffset)
	}
	// The batches as appended, with the offsets and epoch the leader wrote.
	var got [][]byte
	if err := record.SplitBatches(res[0].Records, func(b []byte, h record.Header) error { got = append(got, b); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0]) != len(b1) || len(got[1]) != len(b2) || !bytes.Equal(got[0][record.HeaderSize:], b1[record.HeaderSize:]) {
		t.Fatalf("fetched %d batches, want the 2 appended", len(got))
	}

	offs, err := f.core.ListOffsets(ctx, []request.ListOffsetsPartition{{Topic: "t", Partition: 0, Timestamp: request.LatestTimestamp},
		{Topic: "t", Partition: 0, Timestamp: request.EarliestTimestamp}, {Topic: "t", Partition: 0, Timestamp: 1000}, {Topic: "t", Partition: 9, Timestamp: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if offs[0].Offset != 5 || offs[1].Offset != 0 || offs[2].Offset != 0 || offs[2].Timestamp != 1000 || offs[0].LeaderEpoch != 1 {
		t.Fatalf("list offsets: %+v", offs)
	}
	if c := code(t, offs[3].Err); c != 42 || offs[3].Offset != -1 {
		t.Fatalf("list offsets of partition 9: code %d offset %d, want INVALID_REQUEST, -1", c, offs[3].Offset)
	}

	dr, err := f.core.DeleteRecords(ctx, &request.DeleteRecordsRequest{Partitions: []request.DeleteRecordsPartition{{Topic: "t", Partition: 0, Offset: 3}}})
	if err != nil || dr[0].Err != nil || dr[0].LowWatermark != 3 {
		t.Fatalf("delete records: %v %+v", err, dr)
	}
	res, _ = f.core.Fetch(ctx, &request.FetchRequest{Partitions: []request.FetchPartition{{Topic: "t", Partition: 0, Offset: 0}}})
	if c := code(t, res[0].Err); c != 1 || res[0].LogStartOffset != 3 {
		t.Fatalf("fetch below the log start: code %d start %d, want OFFSET_OUT_OF_RANGE, 3", c, res[0].LogStartOffset)
	}
}

// A long poll answers once a produce arrives, with its records.
func TestCoreFetchLongPoll(t *testing.T) {
	t.Parallel()
	f := newCore(t, nil)
	ctx := ctxT(t)
	done := make(chan []request.FetchResult, 1)
	go func() {
		res, _ := f.core.Fetch(ctx, &request.FetchRequest{MaxWait: time.Minute, MinBytes: 1,
			Partitions: []request.FetchPartition{{Topic: "t", Partition: 0, Offset: 0}}})
		done <- res
	}()
	if _, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(4)}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if len(res) != 1 || res[0].Err != nil || len(res[0].Records) == 0 {
			t.Fatalf("long poll answered %+v, want the records", res)
		}
	case <-ctx.Done():
		t.Fatal("the long poll never answered")
	}
}

// Partitions led elsewhere go to their leaders with Route, one call per
// leader holding all of its partitions in request order; an unreachable
// leader leaves NOT_LEADER_OR_FOLLOWER with its id; without Route every
// such partition is NOT_LEADER_OR_FOLLOWER.
func TestCoreProduceForwardsBatchedPerLeader(t *testing.T) {
	t.Parallel()
	f := newCore(t, nil)
	ctx := ctxT(t)
	parts := []request.ProducePartition{{Topic: "t", Partition: 2, Records: batch(1)}, {Topic: "t", Partition: 0, Records: batch(1)},
		{Topic: "t", Partition: 1, Records: batch(2)}, {Topic: "t", Partition: 3, Records: batch(1)}}
	out, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, Route: true, Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.fwd.produces[2]) != 1 || len(f.fwd.produces[2][0].Partitions) != 2 ||
		f.fwd.produces[2][0].Partitions[0].Partition != 2 || f.fwd.produces[2][0].Partitions[1].Partition != 1 {
		t.Fatalf("calls to leader 2: %+v, want one with partitions 2 then 1", f.fwd.produces[2])
	}
	if out[0].BaseOffset != 200 || out[2].BaseOffset != 100 || out[1].BaseOffset != 0 || out[0].Err != nil || out[1].Err != nil || out[2].Err != nil {
		t.Fatalf("answers %+v", out)
	}
	var e *request.Error
	if !errors.As(out[3].Err, &e) || e.Code != 6 || e.LeaderID != 3 || e.LeaderEpoch != 7 {
		t.Fatalf("partition of the unreachable leader: %v, want NOT_LEADER_OR_FOLLOWER naming leader 3 at epoch 7", out[3].Err)
	}

	out, err = f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: parts[2:3]})
	if err != nil || code(t, out[0].Err) != 6 || len(f.fwd.produces[2]) != 1 {
		t.Fatalf("without Route: %v %+v (calls %d)", err, out, len(f.fwd.produces[2]))
	}
}

// DeleteRecords passes partitions led elsewhere on, one call per leader.
func TestCoreDeleteRecordsForwards(t *testing.T) {
	t.Parallel()
	f := newCore(t, nil)
	ctx := ctxT(t)
	out, err := f.core.DeleteRecords(ctx, &request.DeleteRecordsRequest{Route: true, Partitions: []request.DeleteRecordsPartition{
		{Topic: "t", Partition: 1, Offset: 4}, {Topic: "t", Partition: 0, Offset: -1}, {Topic: "t", Partition: 2, Offset: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.fwd.deletes[2]) != 1 || len(f.fwd.deletes[2][0]) != 2 {
		t.Fatalf("calls to leader 2: %+v, want one with both partitions", f.fwd.deletes[2])
	}
	if out[0].LowWatermark != 4 || out[1].LowWatermark != 0 || out[2].LowWatermark != 6 {
		t.Fatalf("answers %+v", out)
	}
	_, err = f.core.DeleteRecords(ctx, &request.DeleteRecordsRequest{Partitions: []request.DeleteRecordsPartition{{Topic: "t", Offset: 1}, {Topic: "t", Offset: 2}}})
	if code(t, err) != 42 {
		t.Fatalf("a partition named twice: %v, want INVALID_REQUEST", err)
	}
}

// Bad requests and refusals are whole-request errors with their codes.
func TestCoreRefusals(t *testing.T) {
	t.Parallel()
	f := newCore(t, func(c *request.Config) {
		c.Authorizer = acls{auth.OpWrite: {"t": true}, auth.OpRead: {"t": true}}
	})
	ctx := request.WithPrincipal(ctxT(t), "User:alice")
	p0 := []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(1)}}
	for _, tc := range []struct {
		name string
		err  error
		want int32
	}{
		{"acks 2", func() error {
			_, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 2, Partitions: p0})
			return err
		}(), 21},
		{"no partitions", func() error { _, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1}); return err }(), 42},
		{"write to u", func() error {
			_, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "u", Records: batch(1)}}})
			return err
		}(), 29},
		{"describe t", func() error {
			_, err := f.core.ListOffsets(ctx, []request.ListOffsetsPartition{{Topic: "t", Timestamp: -1}})
			return err
		}(), 29},
		{"delete t", func() error {
			_, err := f.core.DeleteRecords(ctx, &request.DeleteRecordsRequest{Partitions: []request.DeleteRecordsPartition{{Topic: "t", Offset: 1}}})
			return err
		}(), 29},
		// A negative wait or size is refused, not read as zero (a
		// minute's wait with min bytes -1 would be answered at once).
		{"fetch min bytes -1", func() error {
			_, err := f.core.Fetch(ctx, &request.FetchRequest{MaxWait: time.Minute, MinBytes: -1, Partitions: []request.FetchPartition{{Topic: "t"}}})
			return err
		}(), 42},
		{"fetch max wait -1ms", func() error {
			_, err := f.core.Fetch(ctx, &request.FetchRequest{MaxWait: -time.Millisecond, Partitions: []request.FetchPartition{{Topic: "t"}}})
			return err
		}(), 42},
		{"fetch partition max bytes -1", func() error {
			_, err := f.core.Fetch(ctx, &request.FetchRequest{Partitions: []request.FetchPartition{{Topic: "t", MaxBytes: -1}}})
			return err
		}(), 42},
	} {
		if got := code(t, tc.err); got != tc.want {
			t.Errorf("%s: %v (code %d), want code %d", tc.name, tc.err, got, tc.want)
		}
	}
	var e *request.Error
	_, err := f.core.ListOffsets(ctx, []request.ListOffsetsPartition{{Topic: "t", Timestamp: -1}})
	if !errors.As(err, &e) || !errors.Is(err, request.ErrTopicAuthorizationFailed) {
		t.Fatalf("refusal %v is not the topic authorization sentinel", err)
	}
	// What the ACLs allow goes through, as the principal of the context.
	if out, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: p0}); err != nil || out[0].Err != nil {
		t.Fatalf("allowed produce: %v %+v", err, out)
	}
	if _, err := f.core.Fetch(request.WithPrincipal(ctxT(t), "User:bob"), &request.FetchRequest{Partitions: []request.FetchPartition{{Topic: "t"}}}); code(t, err) != 29 {
		t.Fatalf("fetch as another principal: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// A leader cut off from the controller refuses appends.
func TestCoreSessionLost(t *testing.T) {
	t.Parallel()
	f := newCore(t, func(c *request.Config) { c.Cluster = cluster{lost: true} })
	out, err := f.core.Produce(ctxT(t), &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(1)}}})
	if err != nil || code(t, out[0].Err) != 5 {
		t.Fatalf("produce cut off from the controller: %v %+v, want LEADER_NOT_AVAILABLE", err, out)
	}
}

// logs answers for broker 2 as the leader of its partitions; broker 3
// does not answer.
type logs struct{}

func (logs) DescribeLogs(_ context.Context, br metadata.BrokerInfo, refs []request.LogRef) ([]request.LogDescription, error) {
	if br.ID != 2 {
		return nil, errors.New("unreachable")
	}
	out := make([]request.LogDescription, len(refs))
	for i, r := range refs {
		out[i] = request.LogDescription{Topic: r.Topic, Partition: r.Partition, Hosted: true, Leader: true, LeaderEpoch: 5,
			LogStartOffset: 10, HighWatermark: 20 + int64(r.Partition), LogEndOffset: 30}
	}
	return out, nil
}

// DescribeTopics gives this broker's own offsets, those a leader answered
// and -1 for a leader that did not; the topics the caller may not
// describe are left out of a listing and refuse a request naming them.
func TestCoreDescribeTopics(t *testing.T) {
	t.Parallel()
	f := newCore(t, func(c *request.Config) { c.Logs = logs{} })
	ctx := ctxT(t)
	if _, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(3)}}}); err != nil {
		t.Fatal(err)
	}
	ds, err := f.core.DescribeTopics(ctx, []string{"t"})
	if err != nil || len(ds) != 1 || len(ds[0].Partitions) != 4 {
		t.Fatalf("describe: %v %+v", err, ds)
	}
	want := [][3]int64{{0, 3, 3}, {10, 21, 30}, {10, 22, 30}, {-1, -1, -1}}
	for i, p := range ds[0].Partitions {
		if got := [3]int64{p.LogStartOffset, p.HighWatermark, p.LogEndOffset}; got != want[i] {
			t.Errorf("partition %d: offsets %v, want %v", i, got, want[i])
		}
	}
	if _, err := f.core.DescribeTopics(ctx, []string{"nope"}); code(t, err) != 3 {
		t.Fatalf("describe an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}

	z := newCore(t, func(c *request.Config) { c.Logs = logs{}; c.Authorizer = acls{auth.OpDescribe: {"t": true}} })
	if ds, err := z.core.DescribeTopics(request.WithPrincipal(ctx, "User:bob"), nil); err != nil || len(ds) != 0 {
		t.Fatalf("listing as a principal with no ACL: %v %+v, want nothing", err, ds)
	}
	if ds, err := z.core.DescribeTopics(request.WithPrincipal(ctx, "User:alice"), nil); err != nil || len(ds) != 1 {
		t.Fatalf("listing as alice: %v %+v, want topic t", err, ds)
	}
	if _, err := z.core.DescribeTopics(request.WithPrincipal(ctx, "User:bob"), []string{"t"}); code(t, err) != 29 {
		t.Fatalf("describing t as bob: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// blocks hands out blocks of two ids from 100 on.
type blocks struct {
	mu    sync.Mutex
	next  int64
	calls int
}

func (b *blocks) AllocateProducerIDs(context.Context) (metadata.ProducerIDBlock, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	blk := metadata.ProducerIDBlock{First: 100 + b.next, Size: 2}
	b.next += 2
	return blk, nil
}

func (b *blocks) NextProducerID() int64 { return 100 }

// InitProducerID hands out ids from blocks, bumps the epoch of an id
// handed out, and refuses a caller that may write nowhere.
func TestCoreInitProducerID(t *testing.T) {
	t.Parallel()
	src := &blocks{}
	f := newCore(t, func(c *request.Config) {
		c.ProducerIDs = src
		c.Authorizer = acls{auth.OpWrite: {"t": true}}
	})
	ctx := request.WithPrincipal(ctxT(t), "User:alice")
	var ids []int64
	for range 3 {
		r, err := f.core.InitProducerID(ctx, request.InitProducerIDRequest{ProducerID: -1})
		if err != nil || r.ProducerEpoch != 0 {
			t.Fatalf("new producer: %v %+v", err, r)
		}
		ids = append(ids, r.ProducerID)
	}
	if ids[0] != 100 || ids[1] != 101 || ids[2] != 102 || src.calls != 2 {
		t.Fatalf("ids %v from %d blocks, want 100, 101, 102 from 2", ids, src.calls)
	}
	// 102's block ends at 104, which the image does not show yet.
	if r, err := f.core.InitProducerID(ctx, request.InitProducerIDRequest{ProducerID: 102, ProducerEpoch: 4}); err != nil || r.ProducerID != 102 || r.ProducerEpoch != 5 {
		t.Fatalf("bump of 102/4: %v %+v, want 102/5", err, r)
	}
	if r, err := f.core.InitProducerID(ctx, request.InitProducerIDRequest{ProducerID: 500, ProducerEpoch: 1}); err != nil || r.ProducerID != 103 || r.ProducerEpoch != 0 {
		t.Fatalf("an id never handed out: %v %+v, want a new one (103/0)", err, r)
	}
	if _, err := f.core.InitProducerID(ctx, request.InitProducerIDRequest{ProducerID: -2}); code(t, err) != 42 {
		t.Fatalf("producer id -2: %v, want INVALID_REQUEST", err)
	}
	if _, err := f.core.InitProducerID(request.WithPrincipal(ctxT(t), "User:bob"), request.InitProducerIDRequest{ProducerID: -1}); !errors.Is(err, request.ErrClusterAuthorizationFailed) {
		t.Fatalf("a caller that may write nowhere: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// PollAnywhere reads the partitions led here from the log and has each
// other leader read its own, one call per leader; a leader that cannot
// be reached is NOT_LEADER_OR_FOLLOWER naming it.
func TestCorePollAnywhere(t *testing.T) {
	t.Parallel()
	f := newCore(t, nil)
	ctx := ctxT(t)
	if _, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(3)}}}); err != nil {
		t.Fatal(err)
	}
	res := f.core.PollAnywhere(ctx, &request.FetchRequest{Route: true, MaxWait: time.Minute, Partitions: []request.FetchPartition{
		{Topic: "t", Partition: 1, Offset: 7}, {Topic: "t", Partition: 0}, {Topic: "t", Partition: 2, Offset: 9}, {Topic: "t", Partition: 3}}})
	if len(f.fwd.fetches[2]) != 1 || len(f.fwd.fetches[2][0].Partitions) != 2 {
		t.Fatalf("calls to leader 2: %+v, want one with partitions 1 and 2", f.fwd.fetches[2])
	}
	if res[0].Err != nil || res[0].HighWatermark != 8 || res[2].Err != nil || res[2].HighWatermark != 10 || len(res[0].Records) == 0 {
		t.Fatalf("the leader's partitions: %+v, %+v", res[0], res[2])
	}
	if res[1].Err != nil || res[1].HighWatermark != 3 || len(res[1].Records) == 0 {
		t.Fatalf("the local partition: %+v", res[1])
	}
	var e *request.Error
	if !errors.As(res[3].Err, &e) || e.Code != 6 || e.LeaderID != 3 {
		t.Fatalf("the unreachable leader's partition: %v, want NOT_LEADER_OR_FOLLOWER naming 3", res[3].Err)
	}
	request.Release(res)
}

// ProduceRecords builds the batches on the broker: a record too large for
// any batch fails alone, the others of its partition are appended with
// contiguous offsets; an idempotent request names one partition.
func TestCoreProduceRecords(t *testing.T) {
	t.Parallel()
	f := newCore(t, func(c *request.Config) {
		c.MaxMessageBytes = func(metadata.TopicInfo) int { return 200 }
		c.Now = func() time.Time { return time.UnixMilli(5000) }
	})
	ctx := ctxT(t)
	out, err := f.core.ProduceRecords(ctx, &request.ProduceRecordsRequest{Topic: "t", Acks: -1, ProducerID: -1, Records: []request.Record{
		{Value: []byte("a"), HasPartition: true}, {Value: make([]byte, 300), HasPartition: true}, {Value: []byte("b"), HasPartition: true, Timestamp: 7},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Offset != 0 || out[0].Timestamp != 5000 || out[2].Offset != 1 || out[2].Timestamp != 7 || out[0].Err != nil || out[2].Err != nil {
		t.Fatalf("answers %+v", out)
	}
	if c := code(t, out[1].Err); c != -1 || out[1].Offset != -1 || !errors.Is(out[1].Err, storage.ErrRecordTooLarge) {
		t.Fatalf("the record too large: %+v, want it refused alone as too large", out[1])
	}
	_, err = f.core.ProduceRecords(ctx, &request.ProduceRecordsRequest{Topic: "t", Acks: -1, ProducerID: 100, Records: []request.Record{
		{Value: []byte("a"), HasPartition: true}, {Value: []byte("b")}}})
	if code(t, err) != 42 {
		t.Fatalf("an idempotent request with a record naming no partition: %v, want INVALID_REQUEST", err)
	}
	if _, err := f.core.ProduceRecords(ctx, &request.ProduceRecordsRequest{Topic: "nope", Acks: 1, ProducerID: -1, Records: []request.Record{{Value: []byte("a")}}}); code(t, err) != 3 {
		t.Fatalf("an unknown topic without auto-creation: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
