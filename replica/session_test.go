package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/storage"
)

// A leader refuses an incremental fetch it has no session for, and one
// that forgets or names partitions the session cannot hold.
func TestLeaderSessionRefusesWhatItCannotApply(t *testing.T) {
	t.Parallel()
	part := func(p int32) FetchPartition { return FetchPartition{Topic: "t", Partition: p} }
	tp := func(p int32) storage.TopicPartition { return storage.TopicPartition{Topic: "t", Partition: p} }
	whole := &FetchRequest{Partitions: []FetchPartition{part(0), part(1)}}
	for _, tc := range []struct {
		name  string
		first *FetchRequest // nil: none before
		req   *FetchRequest
		want  string
	}{
		{"incremental first", nil, &FetchRequest{Incremental: true, Partitions: []FetchPartition{part(0)}}, "no session"},
		{"whole with forgotten", nil, &FetchRequest{Partitions: []FetchPartition{part(0)}, Forgotten: []storage.TopicPartition{tp(0)}},
			"forgets no partitions"},
		{"whole naming one twice", nil, &FetchRequest{Partitions: []FetchPartition{part(0), part(0)}}, "names t-0 twice"},
		{"forgets one not held", whole, &FetchRequest{Incremental: true, Forgotten: []storage.TopicPartition{tp(9)}}, "does not hold"},
		{"incremental naming one twice", whole, &FetchRequest{Incremental: true, Partitions: []FetchPartition{part(4), part(4)}},
			"names t-4 twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewLeaderSession()
			defer s.Close()
			if tc.first != nil {
				if _, err := s.Request(tc.first); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Request(tc.req)
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidRequest saying %q", err, tc.want)
			}
		})
	}
}

// The session's whole fetch keeps the follower's partitions in place as
// they change, and drops the forgotten ones.
func TestLeaderSessionAppliesChanges(t *testing.T) {
	t.Parallel()
	s := NewLeaderSession()
	defer s.Close()
	p := func(n int32, off int64) FetchPartition {
		return FetchPartition{Topic: "t", Partition: n, FetchOffset: off}
	}
	names := func(req *FetchRequest) string {
		var out []string
		for _, f := range req.Partitions {
			out = append(out, fmt.Sprintf("%d@%d", f.Partition, f.FetchOffset))
		}
		return strings.Join(out, " ")
	}
	steps := []struct {
		req  *FetchRequest
		want string
	}{
		{&FetchRequest{Partitions: []FetchPartition{p(0, 0), p(1, 0), p(2, 0)}}, "0@0 1@0 2@0"},
		{&FetchRequest{Incremental: true, Partitions: []FetchPartition{p(1, 7)}}, "0@0 1@7 2@0"},
		{&FetchRequest{Incremental: true, Forgotten: []storage.TopicPartition{{Topic: "t", Partition: 0}}}, "1@7 2@0"},
		{&FetchRequest{Incremental: true, Partitions: []FetchPartition{p(0, 3), p(2, 1)}}, "1@7 2@1 0@3"},
		{&FetchRequest{Partitions: []FetchPartition{p(5, 0)}}, "5@0"},
	}
	for i, st := range steps {
		whole, err := s.Request(st.req)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := names(whole); got != st.want {
			t.Fatalf("step %d: the session fetches %q, want %q", i, got, st.want)
		}
		if whole.Incremental || len(whole.Forgotten) > 0 || whole.Session != s {
			t.Fatalf("step %d: the whole fetch is incremental %v, forgets %v, session %p; want whole in %p", i,
				whole.Incremental, whole.Forgotten, whole.Session, s)
		}
	}
}

// fakeSessionLeader answers a session's fetches from a map of log end
// offsets by partition, as HandleSessionFetch would: a partition's answer
// has HW = LEO = its entry, and one record when the fetch is below it.
type fakeSessionLeader struct {
	s   *LeaderSession
	leo map[storage.TopicPartition]int64
}

func (l *fakeSessionLeader) fetch(t *testing.T, req *FetchRequest) *FetchResponse {
	t.Helper()
	whole, err := l.s.Request(req)
	if err != nil {
		t.Fatal(err)
	}
	resp := &FetchResponse{}
	for _, p := range whole.Partitions {
		leo := l.leo[storage.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
		r := FetchResult{Topic: p.Topic, Partition: p.Partition, HighWatermark: leo, LogEndOffset: leo}
		if p.FetchOffset < leo {
			r.Records = []byte("r")
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	l.s.Answer(req.Incremental, resp)
	return resp
}

// A follower's session names only the partitions that changed, and the
// leader's answers only those with something new; the fetcher still gets
// a result for every partition, in its order, with the offsets last
// answered.
func TestFollowerSessionSendsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	l := &fakeSessionLeader{s: NewLeaderSession(), leo: map[storage.TopicPartition]int64{}}
	defer l.s.Close()
	var f FollowerSession
	const n = 20
	at := map[int32]int64{}
	fetchOf := func(skip int32) *FetchRequest {
		req := &FetchRequest{ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1}
		for p := range int32(n) {
			if p != skip {
				req.Partitions = append(req.Partitions, FetchPartition{Topic: "t", Partition: p, FetchOffset: at[p], LastFetchedEpoch: -1})
			}
		}
		return req
	}
	all := make([]string, n)
	for p := range n {
		all[p] = fmt.Sprintf("t-%d", p)
	}
	every := strings.Join(all, " ")
	names := func(parts []FetchPartition) string {
		var out []string
		for _, p := range parts {
			out = append(out, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
		}
		return strings.Join(out, " ")
	}
	step := func(name string, skip int32, wantIncr bool, wantNamed, wantForgotten, wantAnswered string) {
		t.Helper()
		req := fetchOf(skip)
		sent := f.Message(req)
		var forgotten []string
		for _, k := range sent.Forgotten {
			forgotten = append(forgotten, k.String())
		}
		wire := l.fetch(t, sent)
		var answered []string
		for _, r := range wire.Partitions {
			answered = append(answered, fmt.Sprintf("%s-%d", r.Topic, r.Partition))
		}
		got := fmt.Sprintf("incremental=%v named=[%s] forgotten=[%s] answered=[%s]", sent.Incremental, names(sent.Partitions),
			strings.Join(forgotten, " "), strings.Join(answered, " "))
		want := fmt.Sprintf("incremental=%v named=[%s] forgotten=[%s] answered=[%s]", wantIncr, wantNamed, wantForgotten, wantAnswered)
		if got != want {
			t.Fatalf("%s:\n got  %s\n want %s", name, got, want)
		}
		resp, err := f.Response(req, sent, wire)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(resp.Partitions) != len(req.Partitions) {
			t.Fatalf("%s: %d results for %d partitions", name, len(resp.Partitions), len(req.Partitions))
		}
		for i, r := range resp.Partitions {
			p := req.Partitions[i]
			if r.Topic != p.Topic || r.Partition != p.Partition {
				t.Fatalf("%s: result %d is for %s-%d, fetched %s-%d", name, i, r.Topic, r.Partition, p.Topic, p.Partition)
			}
			if r.Unchanged == slices.Contains(answered, fmt.Sprintf("%s-%d", p.Topic, p.Partition)) {
				t.Fatalf("%s: %s-%d unchanged %v, answered %v", name, p.Topic, p.Partition, r.Unchanged, answered)
			}
			leo := l.leo[storage.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
			if r.HighWatermark != leo || r.LogEndOffset != leo || (len(r.Records) > 0) != (p.FetchOffset < leo) {
				t.Fatalf("%s: %s-%d fetched at %d: HW %d, LEO %d, %d record bytes; the leader is at %d", name,
					p.Topic, p.Partition, p.FetchOffset, r.HighWatermark, r.LogEndOffset, len(r.Records), leo)
			}
		}
	}
	const none = -1
	step("first fetch", none, false, every, "", every)
	step("nothing changed", none, true, "", "", "")
	l.leo[storage.TopicPartition{Topic: "t", Partition: 3}] = 5
	step("the leader appended to t-3", none, true, "", "", "t-3")
	at[3] = 5
	step("the follower took t-3's records", none, true, "t-3", "", "")
	step("t-7 no longer fetched", 7, true, "", "t-7", "")
	step("t-7 fetched again", none, true, "t-7", "", "t-7")
	// A session lost (its stream ended) starts again whole.
	f.Reset()
	step("after a reset", none, false, every, "", every)
	step("the new session", none, true, "", "", "")
}

// After a refusal, the next clean answer goes to the follower even if no
// offset moved (the follower applied nothing of the refusal: that answer
// is the one it applies), and the follower takes a partition left out
// as unchanged only after a clean answer.
func TestFetchSessionAnswersAgainAfterARefusal(t *testing.T) {
	t.Parallel()
	leader := NewLeaderSession()
	defer leader.Close()
	var follower FollowerSession
	req := &FetchRequest{ReplicaID: 2, Partitions: []FetchPartition{{Topic: "t", CurrentLeaderEpoch: 6, FetchOffset: 10, LastFetchedEpoch: 5}}}
	refused := &NotLeaderError{Topic: "t", Leader: 1, Epoch: 5}
	// round is one fetch through both sessions; the leader's answer for
	// t-0 has HW and LEO 10 and err. It returns whether t-0 was sent and
	// what the fetcher got.
	round := func(err error) (sent bool, got FetchResult) {
		t.Helper()
		msg := follower.Message(req)
		if _, e := leader.Request(msg); e != nil {
			t.Fatal(e)
		}
		resp := &FetchResponse{Partitions: []FetchResult{{Topic: "t", HighWatermark: 10, LogEndOffset: 10, Err: err}}}
		leader.Answer(msg.Incremental, resp)
		sent = len(resp.Partitions) == 1
		ans, e := follower.Response(req, msg, resp)
		if e != nil {
			t.Fatal(e)
		}
		return sent, ans.Partitions[0]
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
			t.Fatalf("%s: sent %v, unchanged %v, error %v; want %v, %v, %v", step.name, sent, got.Unchanged, got.Err,
				step.sent, step.unchanged, step.err)
		}
	}

	// A leader that leaves out the first clean answer after a refusal
	// still has its offsets applied.
	round(refused)
	msg := follower.Message(req)
	ans, err := follower.Response(req, msg, &FetchResponse{Session: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := ans.Partitions[0]; r.Unchanged || r.HighWatermark != 10 {
		t.Fatalf("left out after a refusal: unchanged %v, HW %d; want applied, HW 10", r.Unchanged, r.HighWatermark)
	}
}

// A follower refuses an answer that does not match what it asked: a
// whole answer of other partitions, or an incremental one that leaves out
// a partition never answered or names one not fetched.
func TestFollowerSessionRefusesAnswersThatDoNotFit(t *testing.T) {
	t.Parallel()
	req := &FetchRequest{ReplicaID: 2, Partitions: []FetchPartition{{Topic: "t"}, {Topic: "t", Partition: 1}}}
	var f FollowerSession
	sent := f.Message(req)
	if _, err := f.Response(req, sent, &FetchResponse{Partitions: []FetchResult{{Topic: "t"}}}); err == nil {
		t.Fatal("a whole answer of 1 partition for 2 was taken")
	}
	f.Reset()
	sent = f.Message(req)
	if _, err := f.Response(req, sent, &FetchResponse{Partitions: []FetchResult{{Topic: "t"}, {Topic: "u"}}}); err == nil {
		t.Fatal("a whole answer naming u-0 for t-1 was taken")
	}
	f.Reset()
	sent = f.Message(req)
	if _, err := f.Response(req, sent, &FetchResponse{Partitions: []FetchResult{{Topic: "t"}, {Topic: "t", Partition: 1}}, Session: true}); err != nil {
		t.Fatal(err)
	}
	more := &FetchRequest{ReplicaID: 2, Partitions: append(slices.Clone(req.Partitions), FetchPartition{Topic: "t", Partition: 2})}
	sent = f.Message(more)
	if !sent.Incremental || len(sent.Partitions) != 1 {
		t.Fatalf("adding t-2 sent incremental %v with %d partitions, want t-2 alone", sent.Incremental, len(sent.Partitions))
	}
	if _, err := f.Response(more, sent, &FetchResponse{Session: true}); err == nil || !strings.Contains(err.Error(), "has not answered") {
		t.Fatalf("an answer leaving out t-2, never answered: %v, want refused", err)
	}
	f.Reset()
	if _, err := f.Response(req, f.Message(req), &FetchResponse{Partitions: []FetchResult{{Topic: "t"}, {Topic: "t", Partition: 1}}, Session: true}); err != nil {
		t.Fatal(err)
	}
	sent = f.Message(req)
	if _, err := f.Response(req, sent, &FetchResponse{Partitions: []FetchResult{{Topic: "x"}}, Session: true}); err == nil ||
		!strings.Contains(err.Error(), "not fetched") {
		t.Fatalf("an answer naming x-0, not fetched: %v, want refused", err)
	}
}

// HandleSessionFetch serves a session over the replicas: the first fetch
// is whole and answered whole, a later one names only what changed and is
// answered only what is new, and HandleFetch refuses an incremental fetch
// outside a session.
func TestHandleSessionFetch(t *testing.T) {
	t.Parallel()
	rm, parts, req := sessionLeader(t, 3)
	req.Session.Close()
	req.Session, req.MaxWaitMs = nil, 0
	s := NewLeaderSession()
	defer s.Close()
	ctx := context.Background()
	resp, err := rm.HandleSessionFetch(ctx, s, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Partitions) != 3 || !resp.Session {
		t.Fatalf("first fetch answered %d partitions (session %v), want 3 in a session", len(resp.Partitions), resp.Session)
	}
	rm.ReleaseFetch(resp)
	idle := &FetchRequest{ReplicaID: 2, MinBytes: 1, MaxBytes: 1 << 20, Incremental: true}
	if resp, err = rm.HandleSessionFetch(ctx, s, idle); err != nil || len(resp.Partitions) != 0 {
		t.Fatalf("nothing new: %d partitions, %v; want none", len(resp.Partitions), err)
	}
	if _, err := parts[1].appendAsLeader(testBatch(1), 1, 1); err != nil {
		t.Fatal(err)
	}
	resp, err = rm.HandleSessionFetch(ctx, s, idle)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Partitions) != 1 || resp.Partitions[0].Partition != 1 || len(resp.Partitions[0].Records) == 0 {
		t.Fatalf("after an append to t-1: %+v, want t-1 alone with its records", resp.Partitions)
	}
	rm.ReleaseFetch(resp)
	if _, err := rm.HandleFetch(ctx, idle); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("incremental fetch outside a session: %v, want ErrInvalidRequest", err)
	}
}

// inProcessSessions is inProcess with fetch sessions: a fetcher's fetches
// go through a FollowerSession and the leader's HandleSessionFetch, as
// over a stream, with nothing between. An error ends the session at both
// ends, as it ends a stream.
type inProcessSessions struct {
	inProcess
	incremental *atomic.Int64 // incremental fetches sent
}

func (p inProcessSessions) OpenFetchSession(leader int32) FetchSession {
	return &inProcessSession{peers: p, id: leader, leader: NewLeaderSession()}
}

type inProcessSession struct {
	peers    inProcessSessions
	id       int32
	leader   *LeaderSession
	follower FollowerSession
}

func (s *inProcessSession) Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	rm, ok := s.peers.inProcess[s.id]
	if !ok {
		return nil, fmt.Errorf("no broker %d", s.id)
	}
	sent := s.follower.Message(req)
	if sent.Incremental {
		s.peers.incremental.Add(1)
	}
	wire, err := rm.HandleSessionFetch(ctx, s.leader, sent)
	if err == nil {
		var resp *FetchResponse
		if resp, err = s.follower.Response(req, sent, wire); err == nil {
			resp.Done = func() { rm.ReleaseFetch(wire) }
			return resp, nil
		}
		rm.ReleaseFetch(wire)
	}
	s.leader.Close()
	s.leader = NewLeaderSession()
	s.follower.Reset()
	return nil, err
}

func (s *inProcessSession) Close() { s.leader.Close() }

// A follower's fetchers replicate through fetch sessions: incremental
// fetches once the first is answered, every partition's log the
// leader's, the follower's HW the leader's, and appends to a few of many
// partitions reach the follower as they are made.
func TestReplicaFetcherInSession(t *testing.T) {
	t.Parallel()
	peers := inProcessSessions{inProcess: inProcess{}, incremental: &atomic.Int64{}}
	fc := FetchConfig{MaxWait: 5 * time.Minute, Backoff: 10 * time.Millisecond, CallTimeoutSlop: 5 * time.Second}
	rm1 := newManagerPeers(t, 1, openStorage(t), nil, nil, peers, fc)
	peers.inProcess[1] = rm1
	rm2 := newManagerPeers(t, 2, openStorage(t), nil, nil, peers, fc)
	const n = 8
	a := Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	var leaders, followers []*Partition
	for p := range int32(n) {
		a.Partition = p
		if err := rm1.apply("t", p, a); err != nil {
			t.Fatal(err)
		}
		l, _ := rm1.Partition("t", p)
		if _, err := l.Append(testBatch(int(p)+1), -1); err != nil {
			t.Fatal(err)
		}
		leaders = append(leaders, l)
	}
	for p := range int32(n) {
		a.Partition = p
		if err := rm2.apply("t", p, a); err != nil {
			t.Fatal(err)
		}
		f, _ := rm2.Partition("t", p)
		followers = append(followers, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Appends to two partitions of eight, each acknowledged by the
	// follower (acks=all): the others stay idle in the session.
	for i := range 10 {
		l := leaders[[]int{2, 5}[i%2]]
		res, err := l.Append(testBatch(1), -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AwaitReplicated(ctx, res); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	for p := range n {
		l, f := leaders[p], followers[p]
		poll.True(t, fmt.Sprintf("t-%d's follower HW reaches the leader's", p), func() bool { return f.HighWatermark() == l.HighWatermark() })
		if !bytes.Equal(logContents(t, l), logContents(t, f)) {
			t.Fatalf("t-%d: the follower's log differs from the leader's", p)
		}
	}
	if peers.incremental.Load() == 0 {
		t.Fatal("no incremental fetch: the fetcher did not fetch in a session")
	}
}
