package kafka

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/request"
)

// shareBackend serves share fetches and acknowledgements of topic "a"
// with nothing to hand out, and logs them with the releases in order.
type shareBackend struct {
	fakeBackend
	smu    sync.Mutex
	events []string
	// hold, when set, holds each release until closed; started is told
	// of each release as it starts.
	hold    chan struct{}
	started chan string
	// ledElsewhere answers a fetch or acknowledgement of these partitions
	// NOT_LEADER_OR_FOLLOWER, naming the leader (at epoch 9).
	ledElsewhere map[int32]int32
}

var shareTopicID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func newShareBackend() *shareBackend {
	b := &shareBackend{}
	b.meta = &quirev1.GetMetadataResponse{Topics: []*quirev1.TopicMetadata{{Name: "a", TopicId: base64.RawURLEncoding.EncodeToString(shareTopicID[:])}}}
	return b
}

func (b *shareBackend) log(e string) {
	b.smu.Lock()
	defer b.smu.Unlock()
	b.events = append(b.events, e)
}

func (b *shareBackend) logged() []string {
	b.smu.Lock()
	defer b.smu.Unlock()
	return slices.Clone(b.events)
}

func partsOf(parts []request.SharePartition) string {
	var s []string
	for _, p := range parts {
		s = append(s, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
	}
	return strings.Join(s, ",")
}

func (b *shareBackend) ShareFetch(_ context.Context, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	b.log("fetch " + req.MemberID + " " + partsOf(req.Partitions))
	var out []request.ShareFetchResult
	for _, p := range req.Partitions {
		r := request.ShareFetchResult{Topic: p.Topic, Partition: p.Partition}
		if l, ok := b.ledElsewhere[p.Partition]; ok {
			r.Err = &request.Error{Code: int32(quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER), Message: "led elsewhere", LeaderID: l, LeaderEpoch: 9}
		}
		out = append(out, r)
	}
	return out, nil
}

func (b *shareBackend) ShareAcknowledge(_ context.Context, _, member string, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	b.log("ack " + member + " " + partsOf(parts))
	var out []request.ShareAckResult
	for _, p := range parts {
		r := request.ShareAckResult{Topic: p.Topic, Partition: p.Partition}
		if l, ok := b.ledElsewhere[p.Partition]; ok {
			r.Err = &request.Error{Code: int32(quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER), Message: "led elsewhere", LeaderID: l, LeaderEpoch: 9}
		}
		out = append(out, r)
	}
	return out, nil
}

func (b *shareBackend) ShareRelease(_ context.Context, _, member string, parts []request.SharePartition) error {
	if b.started != nil {
		b.started <- member
	}
	if b.hold != nil {
		<-b.hold
	}
	b.log("release " + member + " " + partsOf(parts))
	return nil
}

func shareFetchReq(member string, epoch int32, parts ...int32) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr("g"), kmsg.StringPtr(member), epoch
	if len(parts) > 0 {
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID = shareTopicID
		for _, p := range parts {
			tp := kmsg.NewShareFetchRequestTopicPartition()
			tp.Partition = p
			if epoch == -1 {
				tp.AcknowledgementBatches = []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}
			}
			t.Partitions = append(t.Partitions, tp)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

func shareFetchOK(t *testing.T, k *kconn, req *kmsg.ShareFetchRequest) {
	t.Helper()
	resp := roundTrip[*kmsg.ShareFetchResponse](k, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch of %s at epoch %d: %v: %s", *req.MemberID, req.ShareSessionEpoch, kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage))
	}
}

func dialAgain(t *testing.T, k *kconn) *kconn {
	t.Helper()
	c, err := net.Dial("tcp", k.c.RemoteAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &kconn{t: t, c: c, r: bufio.NewReader(c)}
}

// openConns is how many connections the server has open: a connection's
// share sessions are released before it stops counting.
func openConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// A connection's end releases what its share sessions' members hold on
// their partitions, and ends the sessions; a session another
// connection opened for one of them since (a reconnect) is not
// released, and goes on.
func TestKafkaShareSessionsReleasedWithConnection(t *testing.T) {
	t.Parallel()
	b := newShareBackend()
	s, k1 := startServerConfig(t, Config{Backend: b, MaxRequestBytes: 1 << 20, ShareGroups: true})
	shareFetchOK(t, k1, shareFetchReq("m1", 0, 0, 1))
	shareFetchOK(t, k1, shareFetchReq("m2", 0, 0))
	k2 := dialAgain(t, k1)
	shareFetchOK(t, k2, shareFetchReq("m2", 0, 1))
	_ = k1.c.Close()
	poll.True(t, "the closed connection's end", func() bool { return openConns(s) == 1 })
	var released []string
	for _, e := range b.logged() {
		if strings.HasPrefix(e, "release") {
			released = append(released, e)
		}
	}
	if want := []string{"release m1 a-0,a-1"}; !slices.Equal(released, want) {
		t.Fatalf("released %q, want %q", released, want)
	}
	// m1's session is gone; m2's new one goes on.
	resp := roundTrip[*kmsg.ShareFetchResponse](k2, shareFetchReq("m1", 1, 0))
	if resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("m1's closed session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	shareFetchOK(t, k2, shareFetchReq("m2", 1))
}

// A new share session of a member whose last one is being released (its
// connection ended) opens once the release is done, so that the release
// cannot take what the new session acquires.
func TestKafkaShareSessionOpensAfterRelease(t *testing.T) {
	t.Parallel()
	b := newShareBackend()
	b.hold, b.started = make(chan struct{}), make(chan string, 1)
	_, k1 := startServerConfig(t, Config{Backend: b, MaxRequestBytes: 1 << 20, ShareGroups: true})
	shareFetchOK(t, k1, shareFetchReq("m", 0, 0))
	_ = k1.c.Close()
	if m := <-b.started; m != "m" {
		t.Fatalf("released %q", m)
	}
	k2 := dialAgain(t, k1)
	k2.request(shareFetchReq("m", 0, 0))
	// Whatever k2's request got to meanwhile, it fetches after the
	// release.
	close(b.hold)
	resp := shareFetchReq("m", 0, 0).ResponseKind().(*kmsg.ShareFetchResponse)
	resp.SetVersion(1)
	k2.response(resp, true)
	if resp.ErrorCode != 0 {
		t.Fatalf("the new session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	want := []string{"fetch m a-0", "release m a-0", "fetch m a-0"}
	if got := b.logged(); !slices.Equal(got, want) {
		t.Fatalf("backend calls %q, want %q", got, want)
	}
}

// Closing a share session (epoch -1) applies its acknowledgements, then
// releases what the member still holds on the session's partitions; a
// ShareAcknowledge closing one does the same.
func TestKafkaShareSessionCloseReleases(t *testing.T) {
	t.Parallel()
	b := newShareBackend()
	_, k := startServerConfig(t, Config{Backend: b, MaxRequestBytes: 1 << 20, ShareGroups: true})
	shareFetchOK(t, k, shareFetchReq("m", 0, 0, 1))
	shareFetchOK(t, k, shareFetchReq("m", -1, 0))
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version = 1
	shareFetchOK(t, k, shareFetchReq("n", 0, 1))
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("g"), kmsg.StringPtr("n"), -1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = shareTopicID
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ap.Partition = 1
	ap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	if resp := roundTrip[*kmsg.ShareAcknowledgeResponse](k, ack); resp.ErrorCode != 0 {
		t.Fatalf("closing acknowledgement: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	want := []string{"fetch m a-0,a-1", "ack m a-0", "release m a-0,a-1", "fetch n a-1", "ack n a-1", "release n a-1"}
	if got := b.logged(); !slices.Equal(got, want) {
		t.Fatalf("backend calls %q, want %q", got, want)
	}
	// Closed: the sessions take no more requests.
	if resp := roundTrip[*kmsg.ShareFetchResponse](k, shareFetchReq("m", 1, 0)); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("m's closed session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
