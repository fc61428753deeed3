package replicagrpc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	protobuf "google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// The fetch session end to end: a follower's Session, the messages on
// the wire, and a leader's replica.LeaderSession.

// sessionLeader serves ReplicaFetchStream with a fetch session, as a leader
// does (replica.Manager.HandleSessionFetch), from a map of log end offsets by partition: a partition's
// answer has HW = LEO = its entry, and one record when the fetch is below
// it. It keeps the last request and answer it saw on the wire.
type sessionLeader struct {
	pb.UnimplementedReplicaServiceServer
	whole    bool // answer whole, never offering a session (an older leader)
	mu       sync.Mutex
	leo      map[storage.TopicPartition]int64
	lastReq  *pb.ReplicaFetchRequest
	lastResp *pb.ReplicaFetchResponse
}

func (l *sessionLeader) ReplicaFetchStream(stream pb.ReplicaService_ReplicaFetchStreamServer) error {
	session := replica.NewLeaderSession()
	defer session.Close()
	fetch := &replica.FetchRequest{}
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		RequestInto(fetch, req)
		whole, err := session.Request(fetch)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		l.mu.Lock()
		resp := &replica.FetchResponse{}
		for _, p := range whole.Partitions {
			leo := l.leo[storage.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
			r := replica.FetchResult{Topic: p.Topic, Partition: p.Partition, HighWatermark: leo, LogEndOffset: leo}
			if p.FetchOffset < leo {
				r.Records = []byte("r")
			}
			resp.Partitions = append(resp.Partitions, r)
		}
		if !l.whole {
			session.Answer(fetch.Incremental, resp)
		}
		out := testCodec.ResponseToPB(resp)
		l.lastReq, l.lastResp = req, out
		l.mu.Unlock()
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}

func (l *sessionLeader) set(topic string, partition int32, leo int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leo[storage.TopicPartition{Topic: topic, Partition: partition}] = leo
}

// wire is what the last fetch sent and got back: whether it was
// incremental, the partitions it named and forgot, and those answered.
func (l *sessionLeader) wire() (incremental bool, named, forgotten, answered []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.lastReq.GetPartitions() {
		named = append(named, fmt.Sprintf("%s-%d", p.GetTopic(), p.GetPartition()))
	}
	for _, p := range l.lastReq.GetForgotten() {
		forgotten = append(forgotten, fmt.Sprintf("%s-%d", p.GetTopic(), p.GetPartition()))
	}
	for _, r := range l.lastResp.GetPartitions() {
		answered = append(answered, fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition()))
	}
	return l.lastReq.GetIncremental(), named, forgotten, answered
}

// offsets is a fetch of partitions t-0 .. t-(n-1) at the given offsets
// (a missing one at 0), leaving out those in skip.
func offsetsFetch(n int32, at map[int32]int64, skip ...int32) *replica.FetchRequest {
	req := &replica.FetchRequest{ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1}
next:
	for p := range n {
		for _, s := range skip {
			if s == p {
				continue next
			}
		}
		req.Partitions = append(req.Partitions, replica.FetchPartition{Topic: "t", Partition: p, FetchOffset: at[p], LastFetchedEpoch: -1})
	}
	return req
}

// A session's fetches name only the partitions that changed, and the
// answers only those with something new; the follower still gets a
// result for every partition, in its order, with the offsets last
// answered.
func TestFetchSessionSendsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	l := &sessionLeader{leo: map[storage.TopicPartition]int64{}}
	sess, _ := startFakeLeader(t, l)
	const n = 20
	at := map[int32]int64{}
	fetch := func(req *replica.FetchRequest) *replica.FetchResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := sess.Fetch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(resp.Done)
		if len(resp.Partitions) != len(req.Partitions) {
			t.Fatalf("%d results for %d partitions", len(resp.Partitions), len(req.Partitions))
		}
		_, _, _, answered := l.wire()
		for i, r := range resp.Partitions {
			p := req.Partitions[i]
			if r.Topic != p.Topic || r.Partition != p.Partition {
				t.Fatalf("result %d is for %s-%d, fetched %s-%d", i, r.Topic, r.Partition, p.Topic, p.Partition)
			}
			// What the leader left out is filled in, and said to be.
			if r.Unchanged == slices.Contains(answered, fmt.Sprintf("%s-%d", p.Topic, p.Partition)) {
				t.Fatalf("%s-%d: unchanged %v, answered on the wire: %v", p.Topic, p.Partition, r.Unchanged, answered)
			}
			leo := l.leo[storage.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
			if r.HighWatermark != leo || r.LogEndOffset != leo || (len(r.Records) > 0) != (p.FetchOffset < leo) {
				t.Fatalf("%s-%d fetched at %d: HW %d, LEO %d, %d record bytes; the leader is at %d",
					p.Topic, p.Partition, p.FetchOffset, r.HighWatermark, r.LogEndOffset, len(r.Records), leo)
			}
		}
		return resp
	}
	check := func(step string, wantIncr bool, wantNamed, wantForgotten, wantAnswered string) {
		t.Helper()
		incr, named, forgotten, answered := l.wire()
		got := fmt.Sprintf("incremental=%v named=[%s] forgotten=[%s] answered=[%s]", incr, strings.Join(named, " "),
			strings.Join(forgotten, " "), strings.Join(answered, " "))
		want := fmt.Sprintf("incremental=%v named=[%s] forgotten=[%s] answered=[%s]", wantIncr, wantNamed, wantForgotten, wantAnswered)
		if got != want {
			t.Fatalf("%s:\n got  %s\n want %s", step, got, want)
		}
	}
	all := make([]string, n)
	for p := range n {
		all[p] = fmt.Sprintf("t-%d", p)
	}
	every := strings.Join(all, " ")

	fetch(offsetsFetch(n, at))
	check("first fetch", false, every, "", every)
	fetch(offsetsFetch(n, at))
	check("nothing changed", true, "", "", "")
	l.set("t", 3, 5)
	fetch(offsetsFetch(n, at))
	check("the leader appended to t-3", true, "", "", "t-3")
	at[3] = 5
	fetch(offsetsFetch(n, at))
	check("the follower took t-3's records", true, "t-3", "", "")
	fetch(offsetsFetch(n, at, 7))
	check("t-7 no longer fetched", true, "", "t-7", "")
	fetch(offsetsFetch(n, at))
	check("t-7 fetched again", true, "t-7", "", "t-7")

	// A new stream is a new session: its first fetch is whole.
	sess.drop()
	fetch(offsetsFetch(n, at))
	check("after the stream ended", false, every, "", every)
	fetch(offsetsFetch(n, at))
	check("the new session", true, "", "", "")
}

// BenchmarkReplicaFetchIdle is a follower's fetch of 100 partitions from
// one leader, one of them moving, the rest idle (each append on the
// moving one ends the long poll), over a loopback gRPC stream: whole
// fetches as before sessions, and in a session. wire-B/op is the request
// and answer messages' size.
func BenchmarkReplicaFetchIdle(b *testing.B) {
	for _, whole := range []bool{true, false} {
		name := "session"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			l := &sessionLeader{whole: whole, leo: map[storage.TopicPartition]int64{}}
			sess, _ := startFakeLeader(b, l)
			at := map[int32]int64{}
			ctx := context.Background()
			wire := 0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				at[0] = int64(i)
				l.set("t", 0, int64(i+1))
				resp, err := sess.Fetch(ctx, offsetsFetch(100, at))
				if err != nil {
					b.Fatal(err)
				}
				if len(resp.Partitions) != 100 || len(resp.Partitions[0].Records) == 0 {
					b.Fatalf("answer of %d partitions, the first with %d record bytes", len(resp.Partitions), len(resp.Partitions[0].Records))
				}
				resp.Done()
				l.mu.Lock()
				wire += protobuf.Size(l.lastReq) + protobuf.Size(l.lastResp)
				l.mu.Unlock()
			}
			b.ReportMetric(float64(wire)/float64(b.N), "wire-B/op")
		})
	}
}
