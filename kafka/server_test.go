package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	qmetadata "github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
)

// fakeBackend answers from its fields and records what it was asked.
type fakeBackend struct {
	noTxns
	mu       sync.Mutex
	produced []*quirev1.ProduceRequest
	fetched  []*quirev1.FetchRequest
	metaReqs []*quirev1.GetMetadataRequest

	produceResp *quirev1.ProduceResponse
	produceErr  error
	fetchResp   *quirev1.FetchResponse
	fetchBlocks bool // Fetch waits for its context
	meta        *quirev1.GetMetadataResponse
}

func (f *fakeBackend) Metadata(_ context.Context, req *request.MetadataRequest) (*request.MetadataResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.metaReqs = append(f.metaReqs, metadataRequest(req))
	return coreMetadata(f.meta), nil
}

// metadataRequest is the core's metadata request as quire.v1's.
func metadataRequest(r *request.MetadataRequest) *quirev1.GetMetadataRequest {
	return &quirev1.GetMetadataRequest{Topics: r.Topics, AllowAutoTopicCreation: r.AllowAutoTopicCreation, MinMetadataIndex: r.MinIndex}
}

// coreMetadata is a quire.v1 metadata answer as the core's.
func coreMetadata(m *quirev1.GetMetadataResponse) *request.MetadataResult {
	if m == nil {
		return &request.MetadataResult{}
	}
	out := &request.MetadataResult{ClusterID: m.ClusterId, ControllerID: m.ControllerId, Index: m.MetadataIndex}
	for _, b := range m.Brokers {
		out.Brokers = append(out.Brokers, qmetadata.BrokerInfo{ID: b.Id, Addr: b.Address, Rack: b.Rack, Fenced: b.Fenced})
	}
	for _, t := range m.Topics {
		tm := request.TopicMetadata{Info: qmetadata.TopicInfo{Name: t.Name, ID: t.TopicId}}
		if t.Error != nil {
			tm.Err = &request.Error{Code: int32(t.Error.Code), Message: t.Error.Message, LeaderID: -1, LeaderEpoch: -1}
		}
		for _, p := range t.Partitions {
			tm.Info.Partitions = append(tm.Info.Partitions, qmetadata.PartitionInfo{Topic: t.Name, Partition: p.Partition, Leader: p.Leader,
				LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.Isr})
		}
		out.Topics = append(out.Topics, tm)
	}
	return out
}

// The fake keeps its answers and records its requests as quire.v1
// messages, converted from and to the request core's types.

// coreErr is e as the core's error; nil for nil.
func coreErr(e *quirev1.Error) error {
	if e == nil {
		return nil
	}
	out := &request.Error{Code: int32(e.Code), Message: e.Message, LeaderID: -1, LeaderEpoch: -1}
	if e.LeaderId > 0 {
		out.LeaderID, out.LeaderEpoch = e.LeaderId, e.LeaderEpoch
	}
	return out
}

func (f *fakeBackend) Produce(_ context.Context, req *request.ProduceRequest) ([]request.ProduceResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: req.Acks}, TimeoutMs: int32(req.Timeout.Milliseconds())}
	for _, p := range req.Partitions {
		in.Partitions = append(in.Partitions, &quirev1.PartitionRecords{Topic: p.Topic, Partition: p.Partition, Records: p.Records})
	}
	f.produced = append(f.produced, in)
	if f.produceErr != nil {
		return nil, f.produceErr
	}
	out := make([]request.ProduceResult, len(req.Partitions))
	for i, p := range req.Partitions {
		out[i] = request.ProduceResult{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, LogStartOffset: -1,
			Err: &request.Error{Code: int32(quirev1.ErrorCode_UNKNOWN_SERVER_ERROR), Message: "no answer for this partition"}}
		for _, r := range f.produceResp.GetPartitions() {
			if r.Topic == p.Topic && r.Partition == p.Partition {
				out[i] = request.ProduceResult{Topic: p.Topic, Partition: p.Partition, BaseOffset: r.BaseOffset, LastOffset: r.LastOffset,
					LogAppendTime: r.LogAppendTimeMs, LogStartOffset: r.LogStartOffset, Err: coreErr(r.Error)}
			}
		}
	}
	return out, nil
}

func (f *fakeBackend) Fetch(ctx context.Context, req *request.FetchRequest) ([]request.FetchResult, error) {
	in := &quirev1.FetchRequest{MaxWaitMs: int32(req.MaxWait.Milliseconds()), MinBytes: int32(req.MinBytes), MaxBytes: int32(req.MaxBytes)}
	for _, p := range req.Partitions {
		fp := &quirev1.FetchPartition{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset, MaxBytes: int32(p.MaxBytes)}
		if p.CurrentLeaderEpoch != nil {
			fp.OptionalCurrentLeaderEpoch = &quirev1.FetchPartition_CurrentLeaderEpoch{CurrentLeaderEpoch: *p.CurrentLeaderEpoch}
		}
		in.Partitions = append(in.Partitions, fp)
	}
	f.mu.Lock()
	f.fetched = append(f.fetched, in)
	blocks, resp := f.fetchBlocks, f.fetchResp
	f.mu.Unlock()
	if blocks {
		<-ctx.Done()
		return nil, fmt.Errorf("stopped: %w", ctx.Err())
	}
	out := make([]request.FetchResult, len(req.Partitions))
	for i, p := range req.Partitions {
		out[i] = request.FetchResult{FetchPartition: p, HighWatermark: -1, LogEndOffset: -1, LogStartOffset: -1,
			Err: &request.Error{Code: int32(quirev1.ErrorCode_UNKNOWN_SERVER_ERROR), Message: "no answer for this partition"}}
		for _, r := range resp.GetPartitions() {
			if r.Topic == p.Topic && r.Partition == p.Partition {
				out[i] = request.FetchResult{FetchPartition: p, Records: r.Records, HighWatermark: r.HighWatermark, LastStableOffset: r.HighWatermark, LogEndOffset: r.LogEndOffset,
					LogStartOffset: r.LogStartOffset, Err: coreErr(r.Error)}
			}
		}
	}
	return out, nil
}

func (f *fakeBackend) ListOffsets(context.Context, []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error) {
	return nil, nil
}

// DeleteRecords deletes up to the offset asked (30, the HW, for -1); topic
// "nope" does not exist.
func (f *fakeBackend) DeleteRecords(_ context.Context, req *request.DeleteRecordsRequest) ([]request.DeleteRecordsResult, error) {
	var out []request.DeleteRecordsResult
	for _, p := range req.Partitions {
		r := request.DeleteRecordsResult{Topic: p.Topic, Partition: p.Partition, LowWatermark: p.Offset}
		switch {
		case p.Topic == "nope":
			r.LowWatermark, r.Err = -1, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION})
		case p.Offset == -1:
			r.LowWatermark = 30
		}
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeBackend) InitProducerID(context.Context, request.InitProducerIDRequest) (request.InitProducerIDResult, error) {
	return request.InitProducerIDResult{ProducerID: 7, ProducerEpoch: 2}, nil
}

func (f *fakeBackend) Coordinator(_ context.Context, group string) (Node, error) {
	if group == "secret" {
		return Node{}, &request.Error{Code: int32(quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED), Message: "User:ANONYMOUS lacks DESCRIBE on group \"secret\""}
	}
	return Node{ID: 1, Addr: "127.0.0.1:9093"}, nil
}

func (f *fakeBackend) ConsumerGroupHeartbeat(context.Context, *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	return nil, errors.New("no groups here")
}

func (f *fakeBackend) ShareGroupHeartbeat(context.Context, *request.ShareHeartbeat) (*request.ShareHeartbeatResult, error) {
	return nil, errors.New("no share groups here")
}

func (f *fakeBackend) ShareFetch(context.Context, *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	return nil, errors.New("no share groups here")
}

func (f *fakeBackend) ShareAcknowledge(context.Context, string, string, []request.SharePartition) ([]request.ShareAckResult, error) {
	return nil, errors.New("no share groups here")
}

func (f *fakeBackend) ShareLockDuration(string) time.Duration { return 0 }

func (f *fakeBackend) ShareRelease(context.Context, string, string, []request.SharePartition) error {
	return errors.New("no share groups here")
}

func (f *fakeBackend) ShareGroupDescribe(context.Context, string) (*request.ShareGroupDescription, error) {
	return nil, request.ErrShareGroupsDisabled
}

func (f *fakeBackend) DescribeShareGroupOffsets(context.Context, string, []request.ShareOffsetTopic) ([]request.ShareOffset, error) {
	return nil, request.ErrShareGroupsDisabled
}

func (f *fakeBackend) AlterShareGroupOffsets(context.Context, string, []request.ShareStartOffset) ([]request.ShareOffset, error) {
	return nil, request.ErrShareGroupsDisabled
}

func (f *fakeBackend) DeleteShareGroupOffsets(context.Context, string, []string) ([]request.ShareTopicResult, error) {
	return nil, errUnimplemented()
}

func (f *fakeBackend) DescribeGroup(_ context.Context, group string) (*request.GroupDescription, error) {
	if group == "gone" {
		return nil, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_GROUP_ID_NOT_FOUND, Message: "no group"})
	}
	return &request.GroupDescription{Group: group, State: "reconciling", Assignor: "uniform",
		Members: []request.GroupMemberDescription{{MemberID: "m1", ClientAddress: "10.0.0.1:5", Topics: []string{"t"},
			Assigned: &request.GroupAssignment{Topics: []request.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}}}}, nil
}

func (f *fakeBackend) ListGroups(context.Context) ([]request.GroupListing, error) {
	return []request.GroupListing{{Group: "a", State: "reconciling"}, {Group: "b", State: "stable"}}, nil
}

func (f *fakeBackend) CommitOffsets(context.Context, *request.CommitOffsetsRequest) (time.Time, error) {
	return time.Time{}, nil
}

func (f *fakeBackend) FetchOffsets(context.Context, string, []request.GroupPartition) ([]request.CommittedOffset, error) {
	return nil, nil
}

// startServer serves backend on a loopback port and returns a connection
// to it.
func startServer(t *testing.T, backend Backend) (*Server, *kconn) {
	t.Helper()
	return startServerConfig(t, Config{Backend: backend, MaxRequestBytes: 1 << 20})
}

func startServerConfig(t *testing.T, cfg Config) (*Server, *kconn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return s, &kconn{t: t, c: c, r: bufio.NewReader(c)}
}

// kconn is a client connection that writes and reads Kafka frames.
type kconn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

// request encodes req at its version, as a client does.
func (k *kconn) request(req kmsg.Request) int32 {
	k.corr++
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
	body = binary.BigEndian.AppendUint32(body, uint32(k.corr))
	body = binary.BigEndian.AppendUint16(body, 4)
	body = append(body, "test"...)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	k.raw(body)
	return k.corr
}

// raw sends body as one frame.
func (k *kconn) raw(body []byte) {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := k.c.Write(append(frame, body...)); err != nil {
		k.t.Fatal(err)
	}
}

// response reads the next answer into resp (at its version) and returns
// its correlation id; flexibleHeader says whether its header has tags.
func (k *kconn) response(resp kmsg.Response, flexibleHeader bool) int32 {
	k.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(k.r, size[:]); err != nil {
		k.t.Fatalf("read answer: %v", err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(k.r, buf); err != nil {
		k.t.Fatalf("read answer: %v", err)
	}
	corr := int32(binary.BigEndian.Uint32(buf))
	body := buf[4:]
	if flexibleHeader {
		if len(body) == 0 || body[0] != 0 {
			k.t.Fatalf("flexible answer header without an empty tag section: % x", buf[:min(len(buf), 8)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		k.t.Fatalf("decode %T v%d: %v", resp, resp.GetVersion(), err)
	}
	return corr
}

// closed reports whether the server closed the connection.
func (k *kconn) closed() bool {
	_, err := k.r.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

func TestKafkaApiVersions(t *testing.T) {
	t.Parallel()
	_, k := startServer(t, &fakeBackend{})
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	corr := k.request(req)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	// ApiVersions answers have a version 0 header, even when flexible.
	if got := k.response(resp, false); got != corr || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v3: correlation %d (want %d), error %d", got, corr, resp.ErrorCode)
	}
	want := map[int16][2]int16{0: {3, 12}, 1: {4, 12}, 2: {1, 6}, 3: {0, 12}, 8: {2, 9}, 9: {1, 9}, 10: {0, 4}, 18: {0, 3}, 21: {0, 2}, 22: {0, 4}, 68: {1, 1},
		11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5}, 15: {0, 5}, 16: {0, 4}, 23: {0, 4}}
	for key, v := range wantAdminVersions { // admin_test.go
		want[key] = v
	}
	want[17], want[36] = [2]int16{0, 1}, [2]int16{0, 2} // SASL (sasl.go)
	// Transactions, version 1 (transactions.go).
	want[24], want[25], want[26], want[27], want[28] = [2]int16{0, 5}, [2]int16{0, 3}, [2]int16{0, 5}, [2]int16{0, 1}, [2]int16{0, 5}
	want[65], want[66] = [2]int16{0, 0}, [2]int16{0, 1}
	if len(resp.ApiKeys) != len(want) {
		t.Fatalf("ApiVersions lists %d APIs, want %d: %+v", len(resp.ApiKeys), len(want), resp.ApiKeys)
	}
	// Transaction version 2 is finalized (v3 carries features).
	if len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].Name != "transaction.version" || resp.FinalizedFeatures[0].MaxVersionLevel != 2 ||
		resp.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("ApiVersions features: %+v (epoch %d)", resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch)
	}
	for _, k := range resp.ApiKeys {
		if w, ok := want[k.ApiKey]; !ok || w != [2]int16{k.MinVersion, k.MaxVersion} {
			t.Errorf("ApiVersions: key %d versions %d-%d, want %v", k.ApiKey, k.MinVersion, k.MaxVersion, w)
		}
	}

	// A newer client's ApiVersions: answered in version 0 with
	// UNSUPPORTED_VERSION and the versions served.
	req = kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	k.corr++
	body := binary.BigEndian.AppendUint16(nil, 18)
	body = binary.BigEndian.AppendUint16(body, 99)
	body = binary.BigEndian.AppendUint32(body, uint32(k.corr))
	body = binary.BigEndian.AppendUint16(body, 0xffff) // null client id
	k.raw(append(body, 0, 0, 0, 0, 0, 0, 0))
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if got := k.response(resp, false); got != k.corr || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(want) {
		t.Fatalf("ApiVersions v99: correlation %d, error %d, %d APIs; want %d, UNSUPPORTED_VERSION, %d", got, resp.ErrorCode, len(resp.ApiKeys), k.corr, len(want))
	}
}

// An API not served (partition reassignment here) cannot be parsed: the
// connection is closed, as Kafka does.
func TestKafkaUnservedApiClosesTheConnection(t *testing.T) {
	t.Parallel()
	_, k := startServer(t, &fakeBackend{})
	req := kmsg.NewPtrDescribeDelegationTokenRequest()
	req.Version = 0
	k.request(req)
	if !k.closed() {
		t.Fatal("connection still open after DescribeDelegationToken")
	}
}

func TestKafkaUnservedVersionClosesTheConnection(t *testing.T) {
	t.Parallel()
	_, k := startServer(t, &fakeBackend{})
	req := kmsg.NewPtrProduceRequest()
	req.Version = 2 // message sets v0/v1, not RecordBatch v2
	k.request(req)
	if !k.closed() {
		t.Fatal("connection still open after Produce v2")
	}
}

func TestKafkaOversizeRequestClosesTheConnection(t *testing.T) {
	t.Parallel()
	_, k := startServer(t, &fakeBackend{})
	if _, err := k.c.Write(binary.BigEndian.AppendUint32(nil, 2<<20)); err != nil {
		t.Fatal(err)
	}
	if !k.closed() {
		t.Fatal("connection still open after announcing a 2 MiB request over a 1 MiB limit")
	}
}

// Requests are answered in order; an acks=0 produce gets no answer (the
// next answer read is the next request's) but is appended.
func TestKafkaAnswersInOrderAcksZeroNone(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{produceResp: &quirev1.ProduceResponse{Partitions: []*quirev1.PartitionProduceResult{{Topic: "t", Partition: 0}}}}
	_, k := startServer(t, backend)
	prod := kmsg.NewPtrProduceRequest()
	prod.Version, prod.Acks, prod.TimeoutMillis = 7, 0, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte("batch")
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	k.request(prod)
	var corrs []int32
	for range 3 {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 2
		corrs = append(corrs, k.request(req))
	}
	for _, want := range corrs {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 2
		if got := k.response(resp, false); got != want {
			t.Fatalf("answer for correlation %d, want %d (in order, none for acks=0)", got, want)
		}
	}
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if len(backend.produced) != 1 || backend.produced[0].GetAcks() != 0 || string(backend.produced[0].Partitions[0].Records) != "batch" {
		t.Fatalf("backend produced %+v, want the acks=0 batch once", backend.produced)
	}
}

func produceReq(version int16, parts ...int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	for _, p := range parts {
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = p, []byte("batch")
		pt.Partitions = append(pt.Partitions, pp)
	}
	req.Topics = append(req.Topics, pt)
	return req
}

// A partition's quire.v1.Error is its Kafka code (the same number; -1 for
// UNKNOWN_SERVER_ERROR) with its message; a partition the backend did not
// answer fails; a whole-call error fails every partition with its code.
func TestKafkaProduceErrors(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{produceResp: &quirev1.ProduceResponse{Partitions: []*quirev1.PartitionProduceResult{
		{Topic: "t", Partition: 0, BaseOffset: 41, LogStartOffset: 3, LogAppendTimeMs: -1},
		{Topic: "t", Partition: 1, Error: &quirev1.Error{Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: "broker 2 leads t/1"}},
		{Topic: "t", Partition: 2, Error: &quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_SERVER_ERROR, Message: "boom"}},
	}}}
	_, k := startServer(t, backend)
	req := produceReq(9, 0, 1, 2, 3)
	corr := k.request(req)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if got := k.response(resp, true); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	ps := resp.Topics[0].Partitions
	type want struct {
		code int16
		msg  string
		base int64
	}
	for i, w := range []want{{0, "", 41}, {6, "broker 2 leads t/1", -1}, {-1, "boom", -1}, {-1, "no answer for this partition", -1}} {
		p := ps[i]
		msg := ""
		if p.ErrorMessage != nil {
			msg = *p.ErrorMessage
		}
		if p.Partition != int32(i) || p.ErrorCode != w.code || msg != w.msg || p.BaseOffset != w.base {
			t.Errorf("partition %d: code %d msg %q base %d, want %+v", p.Partition, p.ErrorCode, msg, p.BaseOffset, w)
		}
	}
	if ps[0].LogStartOffset != 3 || ps[0].LogAppendTime != -1 {
		t.Errorf("partition 0: log start %d, append time %d; want 3, -1 (create time)", ps[0].LogStartOffset, ps[0].LogAppendTime)
	}

	backend.mu.Lock()
	backend.produceErr = coreErr(&quirev1.Error{Code: quirev1.ErrorCode_INVALID_REQUIRED_ACKS, Message: "acks 5"})
	backend.mu.Unlock()
	corr = k.request(produceReq(9, 0, 1))
	resp = kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if got := k.response(resp, true); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequiredAcks.Code || p.ErrorMessage == nil || *p.ErrorMessage != "acks 5" {
			t.Errorf("whole-call error: partition %d code %d, want INVALID_REQUIRED_ACKS with its message", p.Partition, p.ErrorCode)
		}
	}
}

func fetchReq(version int16, sessionID, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = version, -1, 500, 1, 1<<20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 5, 1<<20, 3
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// Fetch sessions are declined: a session id or an incremental epoch is
// refused with Kafka's code; a full fetch is answered with session id 0,
// the records passed through and the last stable offset at the high
// watermark.
func TestKafkaFetch(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{fetchResp: &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{
		{Topic: "t", Partition: 0, HighWatermark: 9, LogEndOffset: 10, LogStartOffset: 1, Records: []byte("batches")}}}}
	_, k := startServer(t, backend)
	for _, tc := range []struct {
		id, epoch int32
		code      int16
	}{{7, 1, kerr.FetchSessionIDNotFound.Code}, {0, 1, kerr.InvalidFetchSessionEpoch.Code}, {0, 0, 0}, {0, -1, 0}} {
		k.request(fetchReq(12, tc.id, tc.epoch))
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		k.response(resp, true)
		if resp.ErrorCode != tc.code || resp.SessionID != 0 {
			t.Fatalf("session %d epoch %d: error %d session %d, want %d, 0", tc.id, tc.epoch, resp.ErrorCode, resp.SessionID, tc.code)
		}
		if tc.code != 0 {
			continue
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 9 || p.LastStableOffset != 9 || p.LogStartOffset != 1 || string(p.RecordBatches) != "batches" ||
			p.DivergingEpoch.Epoch != -1 || p.PreferredReadReplica != -1 {
			t.Fatalf("fetch answer %+v", p)
		}
	}
	backend.mu.Lock()
	got := backend.fetched[0]
	backend.mu.Unlock()
	if len(got.Partitions) != 1 || got.Partitions[0].Offset != 5 || got.Partitions[0].GetCurrentLeaderEpoch() != 3 || got.MaxWaitMs != 500 {
		t.Fatalf("backend asked %+v", got)
	}

	// An empty partition answer is zero bytes of records, not null:
	// librdkafka refuses a null record set.
	backend.mu.Lock()
	backend.fetchResp = &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{{Topic: "t", Partition: 0, HighWatermark: 9}}}
	backend.mu.Unlock()
	k.request(fetchReq(11, 0, -1))
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	k.response(resp, false)
	if rb := resp.Topics[0].Partitions[0].RecordBatches; rb == nil {
		t.Fatal("empty fetch answered with null records")
	}
}

// Close ends a long poll in progress and waits for it.
func TestKafkaCloseEndsLongPolls(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{fetchBlocks: true}
	s, k := startServer(t, backend)
	k.request(fetchReq(11, 0, -1))
	deadline := time.Now().Add(10 * time.Second)
	for {
		backend.mu.Lock()
		n := len(backend.fetched)
		backend.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fetch never reached the backend")
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return while a fetch long-polled")
	}
	// The fetch is answered (retriable: the client looks for the
	// partition's leader again), then the connection closes.
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	k.response(resp, false)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch ended by Close answered %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	if !k.closed() {
		t.Fatal("connection open after Close")
	}
}

// Metadata: all topics for a null list (or an empty one in version 0),
// none for an empty one; brokers as the backend gives them; a leaderless
// partition is LEADER_NOT_AVAILABLE.
func TestKafkaMetadata(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{meta: &quirev1.GetMetadataResponse{ClusterId: "c", ControllerId: 1,
		Brokers: []*quirev1.Broker{{Id: 1, Address: "127.0.0.1:9093", Rack: "r1"}},
		Topics: []*quirev1.TopicMetadata{{Name: "t", TopicId: "AAECAwQFBgcICQoLDA0ODw", Partitions: []*quirev1.PartitionMetadata{
			{Partition: 0, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1}, Isr: []int32{1}},
			{Partition: 1, Leader: -1, Replicas: []int32{1}}}}}}}
	_, k := startServer(t, backend)
	ask := func(version int16, topics []string, null bool) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = version
		if !null {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, n := range topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, mt)
		}
		k.request(req)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = version
		k.response(resp, req.IsFlexible())
		return resp
	}
	resp := ask(12, nil, true)
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "127.0.0.1" || resp.Brokers[0].Port != 9093 || *resp.Brokers[0].Rack != "r1" ||
		*resp.ClusterID != "c" || resp.ControllerID != 1 {
		t.Fatalf("brokers %+v cluster %v controller %d", resp.Brokers, resp.ClusterID, resp.ControllerID)
	}
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "t" || resp.Topics[0].TopicID != [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} {
		t.Fatalf("topics %+v", resp.Topics)
	}
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].Leader != 1 || ps[0].LeaderEpoch != 4 || ps[1].ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("partitions %+v", ps)
	}
	if resp := ask(12, nil, false); len(resp.Topics) != 0 || len(resp.Brokers) != 1 {
		t.Fatalf("an empty topic list answered %d topics, %d brokers; want 0, 1", len(resp.Topics), len(resp.Brokers))
	}
	if resp := ask(0, nil, false); len(resp.Topics) != 1 {
		t.Fatalf("version 0, an empty list (all topics): %d topics", len(resp.Topics))
	}
	ask(12, []string{"t"}, false)
	backend.mu.Lock()
	last := backend.metaReqs[len(backend.metaReqs)-1]
	backend.mu.Unlock()
	if len(last.Topics) != 1 || last.Topics[0] != "t" || last.AllowAutoTopicCreation {
		t.Fatalf("backend asked %+v, want t without auto-creation (v12 defaults it off here)", last)
	}
}

// Whatever bytes a request holds, the server answers or refuses it
// without panicking. Seeded with a request of every API and version
// served.
func FuzzKafkaRequest(f *testing.F) {
	for _, req := range []kmsg.Request{produceReq(9, 0), fetchReq(12, 0, -1), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrApiVersionsRequest()} {
		k := &kconn{}
		body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
		body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
		body = binary.BigEndian.AppendUint32(body, uint32(k.corr))
		body = binary.BigEndian.AppendUint16(body, 0xffff)
		if req.IsFlexible() {
			body = append(body, 0)
		}
		f.Add(req.AppendTo(body))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	servedVersions(func(key, version int16) {
		_, body := randomRequest(rng, key, version)
		f.Add(requestFrame(key, version, body))
	})
	s := NewServer(Config{Backend: &fakeBackend{produceResp: &quirev1.ProduceResponse{}, fetchResp: &quirev1.FetchResponse{},
		meta: &quirev1.GetMetadataResponse{}}, MaxRequestBytes: 1 << 20})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // long polls end at once
	f.Fuzz(func(t *testing.T, buf []byte) {
		_, _ = s.handle(ctx, &connState{}, buf, nil)
	})
}

// An answer goes out before the next request is handled: one that is
// followed by an acks=0 produce (no answer to carry it), or by a long
// poll, is not held back.
func TestKafkaAnswerNotHeldByTheNextRequest(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{produceResp: &quirev1.ProduceResponse{}, fetchBlocks: true}
	_, k := startServer(t, backend)
	// ApiVersions, then an acks=0 produce, in one write.
	var frames []byte
	capture := &kconn{t: t, c: captureConn{&frames}}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 2
	capture.corr = k.corr
	want := capture.request(av)
	prod := produceReq(7, 0)
	prod.Acks = 0
	capture.request(prod)
	// And a fetch that long-polls until the server closes, then another
	// ApiVersions behind it.
	capture.request(fetchReq(11, 0, -1))
	k.corr = capture.corr
	if _, err := k.c.Write(frames); err != nil {
		t.Fatal(err)
	}
	_ = k.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 2
	if got := k.response(resp, false); got != want {
		t.Fatalf("answer for %d, want %d", got, want)
	}
}

// captureConn is a net.Conn whose writes are kept, to send several frames
// in one write.
type captureConn struct{ buf *[]byte }

func (c captureConn) Write(p []byte) (int, error) { *c.buf = append(*c.buf, p...); return len(p), nil }
func (captureConn) Read([]byte) (int, error)      { return 0, io.EOF }
func (captureConn) Close() error                  { return nil }
func (captureConn) LocalAddr() net.Addr           { return nil }
func (captureConn) RemoteAddr() net.Addr          { return nil }
func (captureConn) SetDeadline(time.Time) error   { return nil }
func (captureConn) SetReadDeadline(time.Time) error {
	return nil
}
func (captureConn) SetWriteDeadline(time.Time) error { return nil }

// slowBackend's Produce succeeds once release is closed, whatever its
// context says (an append under way).
type slowBackend struct {
	fakeBackend
	started, release chan struct{}
}

func (s *slowBackend) Produce(_ context.Context, req *request.ProduceRequest) ([]request.ProduceResult, error) {
	close(s.started)
	<-s.release
	return []request.ProduceResult{{Topic: "t", Partition: 0, BaseOffset: 12, LastOffset: 12, LogAppendTime: -1, LogStartOffset: 0}}, nil
}

// A request being answered when Close comes is answered before its
// connection closes: a produce that succeeded is not retried (and for a
// producer that is not idempotent, duplicated).
func TestKafkaCloseAnswersTheRequestInHand(t *testing.T) {
	t.Parallel()
	backend := &slowBackend{started: make(chan struct{}), release: make(chan struct{})}
	s, k := startServer(t, backend)
	corr := k.request(produceReq(9, 0))
	<-backend.started
	go s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		closing := s.closed
		s.mu.Unlock()
		if closing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close never began")
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	close(backend.release) // the append ends after Close began
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if got := k.response(resp, true); got != corr || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[0].BaseOffset != 12 {
		t.Fatalf("answer %d: %+v, want the produce's success at offset 12", got, resp.Topics[0].Partitions[0])
	}
	if !k.closed() {
		t.Fatal("connection open after Close")
	}
}

// A failed acks=0 produce closes the connection, as Kafka does, so the
// client learns of it; a successful one does not.
func TestKafkaAcksZeroFailureClosesTheConnection(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{produceResp: &quirev1.ProduceResponse{Partitions: []*quirev1.PartitionProduceResult{
		{Topic: "t", Partition: 0, Error: &quirev1.Error{Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: "moved"}}}}}
	_, k := startServer(t, backend)
	prod := produceReq(7, 0)
	prod.Acks = 0
	k.request(prod)
	if !k.closed() {
		t.Fatal("connection open after a failed acks=0 produce")
	}
}

// A partition named twice in one produce is INVALID_REQUEST for all, and
// nothing is appended.
func TestKafkaProduceDuplicatePartition(t *testing.T) {
	t.Parallel()
	backend := &fakeBackend{produceResp: &quirev1.ProduceResponse{}}
	_, k := startServer(t, backend)
	k.request(produceReq(9, 0, 0))
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	k.response(resp, true)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate partition answered %d, want INVALID_REQUEST", p.ErrorCode)
		}
	}
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if len(backend.produced) != 0 {
		t.Fatalf("backend appended %d requests", len(backend.produced))
	}
}

// offsetsBackend answers ListOffsets and InitProducerId from the request,
// to check the translation both ways.
type offsetsBackend struct {
	fakeBackend
	lastInit request.InitProducerIDRequest
}

func (o *offsetsBackend) ListOffsets(_ context.Context, parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error) {
	var out []request.ListOffsetsResult
	for _, p := range parts {
		r := request.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: 100 + int64(p.Partition), Timestamp: 5000, LeaderEpoch: 2}
		if p.Partition == 2 {
			r = request.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: -1, Timestamp: -1, LeaderEpoch: -1,
				Err: coreErr(&quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION})}
		}
		out = append(out, r)
	}
	return out, nil
}

func (o *offsetsBackend) InitProducerID(_ context.Context, req request.InitProducerIDRequest) (request.InitProducerIDResult, error) {
	o.mu.Lock()
	o.lastInit = req
	o.mu.Unlock()
	return request.InitProducerIDResult{ProducerID: 7, ProducerEpoch: int16(req.ProducerEpoch + 1)}, nil
}

func TestKafkaListOffsetsAndInitProducerID(t *testing.T) {
	t.Parallel()
	backend := &offsetsBackend{}
	_, k := startServer(t, backend)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 6, -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	for p, ts := range []int64{-1, 4000, -2} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = int32(p), ts
		lt.Partitions = append(lt.Partitions, lp)
	}
	req.Topics = append(req.Topics, lt)
	k.request(req)
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = 6
	k.response(resp, true)
	ps := resp.Topics[0].Partitions
	// The end: its offset, timestamp -1; by time: offset and the record's
	// timestamp; an error: its code, offset -1.
	if ps[0].Offset != 100 || ps[0].Timestamp != -1 || ps[0].LeaderEpoch != 2 ||
		ps[1].Offset != 101 || ps[1].Timestamp != 5000 ||
		ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code || ps[2].Offset != -1 {
		t.Fatalf("ListOffsets answered %+v", ps)
	}

	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.ProducerID, init.ProducerEpoch = 4, 7, 3
	k.request(init)
	iresp := kmsg.NewPtrInitProducerIDResponse()
	iresp.Version = 4
	k.response(iresp, true)
	backend.mu.Lock()
	last := backend.lastInit
	backend.mu.Unlock()
	if iresp.ErrorCode != 0 || iresp.ProducerID != 7 || iresp.ProducerEpoch != 4 || last.ProducerID != 7 || last.ProducerEpoch != 3 {
		t.Fatalf("InitProducerId (bump of 7/3): answered %+v, backend asked %+v", iresp, last)
	}
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.Version, txn.TransactionalID = 4, kmsg.StringPtr("tx")
	k.request(txn)
	iresp = kmsg.NewPtrInitProducerIDResponse()
	iresp.Version = 4
	k.response(iresp, true)
	if iresp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("a transactional id answered %d", iresp.ErrorCode)
	}
}

// TestKafkaDeleteRecords: each partition's offset goes to the backend and
// its low watermark or error code comes back, in the flexible version too;
// an offset below -1 is OFFSET_OUT_OF_RANGE for its partition alone, as
// Kafka answers it.
func TestKafkaDeleteRecords(t *testing.T) {
	t.Parallel()
	_, k := startServer(t, &fakeBackend{})
	for _, version := range []int16{0, 2} {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version = version
		for _, topic := range []string{"t", "nope"} {
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = topic
			for p, off := range []int64{12, -1, -5} {
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition, rp.Offset = int32(p), off
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		k.request(req)
		resp := kmsg.NewPtrDeleteRecordsResponse()
		resp.Version = version
		k.response(resp, version >= 2)
		if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 3 || len(resp.Topics[1].Partitions) != 3 {
			t.Fatalf("v%d: answered %+v", version, resp.Topics)
		}
		ok, nope := resp.Topics[0].Partitions, resp.Topics[1].Partitions
		if ok[0].ErrorCode != 0 || ok[0].LowWatermark != 12 || ok[1].ErrorCode != 0 || ok[1].LowWatermark != 30 ||
			nope[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || nope[0].LowWatermark != -1 ||
			ok[2].ErrorCode != kerr.OffsetOutOfRange.Code || ok[2].LowWatermark != -1 {
			t.Fatalf("v%d: answered %+v and %+v", version, ok, nope)
		}
	}
}

// flakyListener fails its first Accept as a process out of descriptors
// does, then accepts.
type flakyListener struct {
	net.Listener
	failed bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Running out of descriptors is waited out, not the end of the listener.
func TestKafkaAcceptRetriesTemporaryErrors(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{Backend: &fakeBackend{}, MaxRequestBytes: 1 << 20})
	done := make(chan error, 1)
	go func() { done <- s.Serve(&flakyListener{Listener: lis}) }()
	defer func() {
		s.Close()
		<-done
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	k := &kconn{t: t, c: c, r: bufio.NewReader(c)}
	req := kmsg.NewPtrApiVersionsRequest()
	corr := k.request(req)
	resp := kmsg.NewPtrApiVersionsResponse()
	if got := k.response(resp, false); got != corr {
		t.Fatalf("answer %d, want %d", got, corr)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v after a temporary accept error", err)
	default:
	}
}

// groupsBackend records the group calls and answers FetchOffsets with
// one committed offset.
type groupsBackend struct {
	fakeBackend
	commits []*request.CommitOffsetsRequest
	fetches []fetchOffsets
	hb      *request.GroupHeartbeat
}

// fetchOffsets is one FetchOffsets call.
type fetchOffsets struct {
	group string
	parts []request.GroupPartition
}

func (g *groupsBackend) CommitOffsets(_ context.Context, req *request.CommitOffsetsRequest) (time.Time, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits = append(g.commits, req)
	if req.MemberEpoch == 99 {
		return time.Time{}, &request.Error{Code: int32(quirev1.ErrorCode_STALE_MEMBER_EPOCH), Message: "stale"}
	}
	return time.Time{}, nil
}

func (g *groupsBackend) FetchOffsets(_ context.Context, group string, parts []request.GroupPartition) ([]request.CommittedOffset, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fetches = append(g.fetches, fetchOffsets{group: group, parts: parts})
	return []request.CommittedOffset{{Topic: "t", Partition: 1, Offset: 42, LeaderEpoch: 3, Metadata: "m"}}, nil
}

func (g *groupsBackend) ConsumerGroupHeartbeat(_ context.Context, req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	g.mu.Lock()
	g.hb = req
	g.mu.Unlock()
	return &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: 5, HeartbeatIntervalMs: 3000,
		Assignment: &request.GroupAssignment{Topics: []request.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}}, nil
}

func TestKafkaGroups(t *testing.T) {
	t.Parallel()
	id := [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	backend := &groupsBackend{fakeBackend: fakeBackend{meta: &quirev1.GetMetadataResponse{
		Topics: []*quirev1.TopicMetadata{{Name: "t", TopicId: "AAECAwQFBgcICQoLDA0ODw"}}}}}
	_, k := startServer(t, backend)

	// FindCoordinator: this node, one key (v3) or each of several (v4);
	// a transaction coordinator is refused.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g"
	k.request(fc)
	fr := kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = 3
	k.response(fr, true)
	if fr.ErrorCode != 0 || fr.NodeID != 1 || fr.Host != "127.0.0.1" || fr.Port != 9093 {
		t.Fatalf("FindCoordinator v3: %+v", fr)
	}
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"a", "b"}
	k.request(fc)
	fr = kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = 4
	k.response(fr, true)
	if len(fr.Coordinators) != 2 || fr.Coordinators[1].Key != "b" || fr.Coordinators[1].NodeID != 1 || fr.Coordinators[1].Port != 9093 {
		t.Fatalf("FindCoordinator v4: %+v", fr.Coordinators)
	}
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys, fc.CoordinatorType = 4, []string{"tx"}, 1
	k.request(fc)
	fr = kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = 4
	k.response(fr, true)
	if fr.Coordinators[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("a transaction coordinator: %+v", fr.Coordinators[0])
	}
	// A group the caller may not describe is refused, the others named
	// with it answered.
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"secret", "a"}
	k.request(fc)
	fr = kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = 4
	k.response(fr, true)
	if c := fr.Coordinators; len(c) != 2 || c[0].ErrorCode != kerr.GroupAuthorizationFailed.Code || c[0].NodeID != -1 || c[1].ErrorCode != 0 || c[1].NodeID != 1 {
		t.Fatalf("FindCoordinator of a group refused and one not: %+v", fr.Coordinators)
	}

	// The heartbeat names topics by id; the node by name.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = 1, "g", "m1", 0, 30000
	hb.SubscribedTopicNames, hb.ServerAssignor = []string{"t"}, kmsg.StringPtr("uniform")
	hbt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
	hbt.TopicID, hbt.Partitions = id, []int32{}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{hbt}
	k.request(hb)
	hr := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	hr.Version = 1
	k.response(hr, true)
	backend.mu.Lock()
	got := backend.hb
	backend.mu.Unlock()
	if got.Group != "g" || got.MemberID != "m1" || got.Subscription.Topics[0] != "t" || got.Assignor != "uniform" ||
		got.RebalanceTimeoutMs != 30000 || len(got.Owned.Topics) != 1 || got.Owned.Topics[0].Topic != "t" {
		t.Fatalf("backend heartbeat %+v", got)
	}
	if hr.ErrorCode != 0 || *hr.MemberID != "m1" || hr.MemberEpoch != 5 || hr.HeartbeatIntervalMillis != 3000 || hr.Assignment == nil ||
		hr.Assignment.Topics[0].TopicID != id || fmt.Sprint(hr.Assignment.Topics[0].Partitions) != "[0 1]" {
		t.Fatalf("heartbeat answer %+v", hr)
	}

	// OffsetCommit: a member's id and epoch pass on; the call's error is
	// every partition's.
	for _, epoch := range []int32{5, 99} {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.MemberID, oc.Generation = 9, "g", "m1", epoch
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = "t"
		for p := range int32(2) {
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch = p, 10+int64(p), 3
			ot.Partitions = append(ot.Partitions, op)
		}
		oc.Topics = append(oc.Topics, ot)
		k.request(oc)
		or := kmsg.NewPtrOffsetCommitResponse()
		or.Version = 9
		k.response(or, true)
		want := int16(0)
		if epoch == 99 {
			want = kerr.StaleMemberEpoch.Code
		}
		for _, p := range or.Topics[0].Partitions {
			if p.ErrorCode != want {
				t.Fatalf("commit at epoch %d: partition %d answered %d, want %d", epoch, p.Partition, p.ErrorCode, want)
			}
		}
	}
	backend.mu.Lock()
	c := backend.commits[0]
	backend.mu.Unlock()
	if c.MemberID != "m1" || c.MemberEpoch != 5 || len(c.Offsets) != 2 || c.Offsets[1].Offset != 11 || c.Offsets[1].LeaderEpoch != 3 {
		t.Fatalf("backend commit %+v", c)
	}

	// OffsetFetch: the partitions named, -1 for one never committed (v8,
	// by group); every committed one for no topic list (v7).
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = "g"
	ogt := kmsg.NewOffsetFetchRequestGroupTopic()
	ogt.Topic, ogt.Partitions = "t", []int32{0, 1}
	og.Topics = []kmsg.OffsetFetchRequestGroupTopic{ogt}
	of.Groups = []kmsg.OffsetFetchRequestGroup{og}
	k.request(of)
	ofr := kmsg.NewPtrOffsetFetchResponse()
	ofr.Version = 8
	k.response(ofr, true)
	ps := ofr.Groups[0].Topics[0].Partitions
	if ps[0].Offset != -1 || ps[1].Offset != 42 || ps[1].LeaderEpoch != 3 || *ps[1].Metadata != "m" {
		t.Fatalf("OffsetFetch v8: %+v", ps)
	}
	of = kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group = 7, "g"
	k.request(of)
	ofr = kmsg.NewPtrOffsetFetchResponse()
	ofr.Version = 7
	k.response(ofr, true)
	if len(ofr.Topics) != 1 || len(ofr.Topics[0].Partitions) != 1 || ofr.Topics[0].Partitions[0].Offset != 42 {
		t.Fatalf("OffsetFetch v7, all: %+v", ofr.Topics)
	}
	backend.mu.Lock()
	all := backend.fetches[1]
	backend.mu.Unlock()
	if all.group != "g" || len(all.parts) != 0 {
		t.Fatalf("no topic list asked the backend for %v of %q, want every committed offset of g", all.parts, all.group)
	}
}

// TestKafkaObserve: every request handled is told to Observe by API, with
// nil for one answered and ErrUnsupported for one not served (which
// closes the connection).
func TestKafkaObserve(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	_, k := startServerConfig(t, Config{Backend: &fakeBackend{}, MaxRequestBytes: 1 << 20,
		Observe: func(api string, start time.Time, err error) {
			mu.Lock()
			defer mu.Unlock()
			if start.IsZero() || time.Since(start) < 0 {
				t.Errorf("%s observed with start %v", api, start)
			}
			outcome := "OK"
			switch {
			case errors.Is(err, ErrUnsupported):
				outcome = "unsupported"
			case err != nil:
				outcome = err.Error()
			}
			seen = append(seen, api+" "+outcome)
		}})
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	k.request(av)
	avr := kmsg.NewPtrApiVersionsResponse()
	avr.Version = 3
	k.response(avr, false)
	ct := kmsg.NewPtrDescribeDelegationTokenRequest()
	ct.Version = 0
	k.request(ct)
	if !k.closed() {
		t.Fatal("connection still open after DescribeDelegationToken")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(seen); got != "[kafka/ApiVersions OK kafka/DescribeDelegationToken unsupported]" {
		t.Fatalf("observed %s", got)
	}
}

// TestKafkaDescribeAndListGroups: DescribeGroups gives the coordinator's
// description in the classic form (a state, members with their
// subscription and assignment encoded as consumers encode them), an
// unknown group as Dead; ListGroups lists the groups.
func TestKafkaDescribeAndListGroups(t *testing.T) {
	t.Parallel()
	_, k := startServer(t, &fakeBackend{})
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{"g", "gone"}
	k.request(dg)
	dr := kmsg.NewPtrDescribeGroupsResponse()
	dr.Version = 5
	k.response(dr, true)
	if len(dr.Groups) != 2 || dr.Groups[1].State != "Dead" || dr.Groups[1].ErrorCode != 0 {
		t.Fatalf("DescribeGroups: %+v", dr.Groups)
	}
	g := dr.Groups[0]
	if g.ErrorCode != 0 || g.State != "CompletingRebalance" || g.ProtocolType != "consumer" || g.Protocol != "uniform" || len(g.Members) != 1 {
		t.Fatalf("DescribeGroups g: %+v", g)
	}
	m := g.Members[0]
	var meta kmsg.ConsumerMemberMetadata
	var a kmsg.ConsumerMemberAssignment
	if err := meta.ReadFrom(m.ProtocolMetadata); err != nil || fmt.Sprint(meta.Topics) != "[t]" {
		t.Fatalf("member metadata %+v (%v)", meta, err)
	}
	if err := a.ReadFrom(m.MemberAssignment); err != nil || len(a.Topics) != 1 || fmt.Sprint(a.Topics[0].Partitions) != "[0 1]" {
		t.Fatalf("member assignment %+v (%v)", a, err)
	}
	if m.MemberID != "m1" || m.ClientHost != "10.0.0.1:5" {
		t.Fatalf("member %+v", m)
	}

	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 3
	k.request(lg)
	lr := kmsg.NewPtrListGroupsResponse()
	lr.Version = 3
	k.response(lr, true)
	if lr.ErrorCode != 0 || len(lr.Groups) != 2 || lr.Groups[1].Group != "b" || lr.Groups[1].ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v", lr)
	}

	// v4: each group's classic state; a states filter is matched without
	// regard to case.
	listV4 := func(states ...string) []string {
		t.Helper()
		lg := kmsg.NewPtrListGroupsRequest()
		lg.Version, lg.StatesFilter = 4, states
		k.request(lg)
		lr := kmsg.NewPtrListGroupsResponse()
		lr.Version = 4
		k.response(lr, true)
		if lr.ErrorCode != 0 {
			t.Fatalf("ListGroups v4 %v: %+v", states, lr)
		}
		var out []string
		for _, g := range lr.Groups {
			out = append(out, g.Group+"="+g.GroupState)
		}
		return out
	}
	if got := fmt.Sprint(listV4()); got != "[a=CompletingRebalance b=Stable]" {
		t.Fatalf("ListGroups v4: %s", got)
	}
	if got := fmt.Sprint(listV4("stable", "Empty")); got != "[b=Stable]" {
		t.Fatalf("ListGroups v4 filtered on stable and Empty: %s", got)
	}
}
