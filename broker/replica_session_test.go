package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	protobuf "google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/replica"
)

// sessionLeader serves ReplicaFetchStream with a fetch session, as the
// broker does, from a map of log end offsets by partition: a partition's
// answer has HW = LEO = its entry, and one record when the fetch is below
// it. It keeps the last request and answer it saw on the wire.
type sessionLeader struct {
	pb.UnimplementedReplicaServiceServer
	whole    bool // answer whole, never offering a session (an older leader)
	mu       sync.Mutex
	leo      map[group.TopicPartition]int64
	lastReq  *pb.ReplicaFetchRequest
	lastResp *pb.ReplicaFetchResponse
}

func (l *sessionLeader) ReplicaFetchStream(stream pb.ReplicaService_ReplicaFetchStreamServer) error {
	session := newLeaderSession()
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		whole, err := session.request(req)
		if err != nil {
			return toStatus(err)
		}
		l.mu.Lock()
		resp := &replica.FetchResponse{}
		for _, p := range whole.Partitions {
			leo := l.leo[keyOf(p)]
			r := replica.FetchResult{Topic: p.Topic, Partition: p.Partition, HighWatermark: leo, LogEndOffset: leo}
			if p.FetchOffset < leo {
				r.Records = []byte("r")
			}
			resp.Partitions = append(resp.Partitions, r)
		}
		if !l.whole {
			session.answer(req.GetIncremental(), resp)
		}
		out := fetchResponseToPB(resp)
		out.Session = !l.whole
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
	l.leo[group.TopicPartition{Topic: topic, Partition: partition}] = leo
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
	l := &sessionLeader{leo: map[group.TopicPartition]int64{}}
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
			leo := l.leo[keyOf(p)]
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
			l := &sessionLeader{whole: whole, leo: map[group.TopicPartition]int64{}}
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

// A leader refuses an incremental fetch it has no session for, and one
// that forgets or names partitions the session cannot hold.
func TestLeaderSessionRefusesWhatItCannotApply(t *testing.T) {
	t.Parallel()
	part := func(p int32) *pb.ReplicaFetchPartition { return &pb.ReplicaFetchPartition{Topic: "t", Partition: p} }
	whole := &pb.ReplicaFetchRequest{Partitions: []*pb.ReplicaFetchPartition{part(0), part(1)}}
	for _, tc := range []struct {
		name  string
		first *pb.ReplicaFetchRequest // nil: none before
		req   *pb.ReplicaFetchRequest
		want  string
	}{
		{"incremental first", nil, &pb.ReplicaFetchRequest{Incremental: true, Partitions: []*pb.ReplicaFetchPartition{part(0)}}, "no session"},
		{"whole with forgotten", nil, &pb.ReplicaFetchRequest{Partitions: []*pb.ReplicaFetchPartition{part(0)},
			Forgotten: []*pb.ReplicaFetchForgotten{{Topic: "t", Partition: 0}}}, "forgets no partitions"},
		{"whole naming one twice", nil, &pb.ReplicaFetchRequest{Partitions: []*pb.ReplicaFetchPartition{part(0), part(0)}}, "names t-0 twice"},
		{"forgets one not held", whole, &pb.ReplicaFetchRequest{Incremental: true,
			Forgotten: []*pb.ReplicaFetchForgotten{{Topic: "t", Partition: 9}}}, "does not hold"},
		{"incremental naming one twice", whole, &pb.ReplicaFetchRequest{Incremental: true,
			Partitions: []*pb.ReplicaFetchPartition{part(4), part(4)}}, "names t-4 twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newLeaderSession()
			if tc.first != nil {
				if _, err := s.request(tc.first); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.request(tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) || lookupError(err).code != lookupError(ErrInvalidRequest).code {
				t.Fatalf("got %v, want INVALID_REQUEST saying %q", err, tc.want)
			}
		})
	}
}

// The session's whole fetch keeps the follower's partitions in place as
// they change, and drops the forgotten ones.
func TestLeaderSessionAppliesChanges(t *testing.T) {
	t.Parallel()
	s := newLeaderSession()
	p := func(n int32, off int64) *pb.ReplicaFetchPartition {
		return &pb.ReplicaFetchPartition{Topic: "t", Partition: n, FetchOffset: off}
	}
	names := func(req *replica.FetchRequest) string {
		var out []string
		for _, f := range req.Partitions {
			out = append(out, fmt.Sprintf("%d@%d", f.Partition, f.FetchOffset))
		}
		return strings.Join(out, " ")
	}
	steps := []struct {
		req  *pb.ReplicaFetchRequest
		want string
	}{
		{&pb.ReplicaFetchRequest{Partitions: []*pb.ReplicaFetchPartition{p(0, 0), p(1, 0), p(2, 0)}}, "0@0 1@0 2@0"},
		{&pb.ReplicaFetchRequest{Incremental: true, Partitions: []*pb.ReplicaFetchPartition{p(1, 7)}}, "0@0 1@7 2@0"},
		{&pb.ReplicaFetchRequest{Incremental: true, Forgotten: []*pb.ReplicaFetchForgotten{{Topic: "t", Partition: 0}}}, "1@7 2@0"},
		{&pb.ReplicaFetchRequest{Incremental: true, Partitions: []*pb.ReplicaFetchPartition{p(0, 3), p(2, 1)}}, "1@7 2@1 0@3"},
		{&pb.ReplicaFetchRequest{Partitions: []*pb.ReplicaFetchPartition{p(5, 0)}}, "5@0"},
	}
	for i, st := range steps {
		whole, err := s.request(st.req)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := names(whole); got != st.want {
			t.Fatalf("step %d: the session fetches %q, want %q", i, got, st.want)
		}
	}
}

// After a refusal, the next clean answer goes on the wire even if no
// offset moved (the follower applied nothing of the refusal: that answer
// is the one it applies), and the follower takes a partition left out
// as unchanged only after a clean answer.
func TestFetchSessionAnswersAgainAfterARefusal(t *testing.T) {
	t.Parallel()
	leader := newLeaderSession()
	defer leader.close()
	var follower followerSession
	req := &replica.FetchRequest{ReplicaID: 2, Partitions: []replica.FetchPartition{{Topic: "t", CurrentLeaderEpoch: 6, FetchOffset: 10, LastFetchedEpoch: 5}}}
	refused := &replica.NotLeaderError{Topic: "t", Leader: 1, Epoch: 5}
	// round is one fetch through both sessions; the leader's answer for
	// t-0 has HW and LEO 10 and err. It returns whether t-0 was on the
	// wire and what the fetcher got.
	round := func(err error) (sent bool, got replica.FetchResult) {
		t.Helper()
		msg := follower.message(req)
		if _, e := leader.request(msg); e != nil {
			t.Fatal(e)
		}
		resp := &replica.FetchResponse{Partitions: []replica.FetchResult{{Topic: "t", HighWatermark: 10, LogEndOffset: 10, Err: err}}}
		leader.answer(msg.GetIncremental(), resp)
		out := fetchResponseToPB(resp)
		out.Session = true
		ans, e := follower.response(req, msg, out)
		if e != nil {
			t.Fatal(e)
		}
		return len(out.Partitions) == 1, ans.Partitions[0]
	}
	for _, step := range []struct {
		name            string
		err             error
		sent, unchanged bool
	}{
		{"first fetch", nil, true, false},
		{"nothing new", nil, false, true},
		{"refused", refused, true, false},
		{"clean again, no offset moved", nil, true, false},
		{"nothing new again", nil, false, true},
	} {
		sent, got := round(step.err)
		if sent != step.sent || got.Unchanged != step.unchanged || (got.Err != nil) != (step.err != nil) {
			t.Fatalf("%s: on the wire %v, unchanged %v, error %v; want %v, %v, %v", step.name, sent, got.Unchanged, got.Err,
				step.sent, step.unchanged, step.err)
		}
	}

	// A leader that leaves out the first clean answer after a refusal
	// still has its offsets applied.
	round(refused)
	msg := follower.message(req)
	ans, err := follower.response(req, msg, &pb.ReplicaFetchResponse{Session: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := ans.Partitions[0]; r.Unchanged || r.HighWatermark != 10 {
		t.Fatalf("left out after a refusal: unchanged %v, HW %d; want applied, HW 10", r.Unchanged, r.HighWatermark)
	}
}
