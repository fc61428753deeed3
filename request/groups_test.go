package request_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/request"
)

// The group calls and the security administration over fakes of the
// coordinator, of the users and ACLs, and of the leaders asked for
// offsets: what each call needs of the ACLs, what it passes on, and what
// a listing leaves out.

// coordinator is a group coordinator in memory: committed offsets by
// group, and the groups with members.
type coordinator struct {
	mu      sync.Mutex
	offsets map[string][]request.CommittedOffset
	members map[string]int
	commits []commitCall
	hbs     []*request.GroupHeartbeat
	deleted []string
	// offsetDeletes are the DeleteOffsets calls, as "group topic".
	offsetDeletes []string
	// joinOnCommit: a member joins as an empty group's commit is made,
	// which the coordinator refuses as it refuses a stale member.
	joinOnCommit bool
}

type commitCall struct {
	group   string
	member  request.GroupMember
	offsets []request.OffsetCommit
}

// errUnknownMember stands for the coordinator's refusal of a commit
// without a member to a group that has some.
var errUnknownMember = errors.New("coordinator: unknown member id")

// errNoGroup stands for the coordinator's GROUP_ID_NOT_FOUND.
var errNoGroup = errors.New("coordinator: group id not found")

func (c *coordinator) ConsumerGroupHeartbeat(_ context.Context, hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hbs = append(c.hbs, hb)
	return &request.GroupHeartbeatResult{MemberID: "m-1", MemberEpoch: 1, HeartbeatIntervalMs: 5000,
		Assignment: &request.GroupAssignment{Topics: []request.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0}}}}}, nil
}

func (c *coordinator) DescribeGroup(_ context.Context, g string) (*request.GroupDescription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.members[g]
	if !ok && c.offsets[g] == nil {
		return nil, fmt.Errorf("%w: %q", errNoGroup, g)
	}
	d := &request.GroupDescription{Group: g, State: "empty"}
	for i := range n {
		d.State = "stable"
		d.Members = append(d.Members, request.GroupMemberDescription{MemberID: fmt.Sprintf("m-%d", i)})
	}
	return d, nil
}

func (c *coordinator) ListGroups(context.Context) ([]request.GroupListing, error) {
	return []request.GroupListing{{Group: "g", State: "empty"}, {Group: "other", State: "stable"}}, nil
}

func (c *coordinator) CommitOffsets(_ context.Context, g string, m request.GroupMember, offs []request.OffsetCommit, now time.Time) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.joinOnCommit {
		c.members[g]++
	}
	if m.ID == "" && c.members[g] > 0 {
		return time.Time{}, errUnknownMember
	}
	c.commits = append(c.commits, commitCall{group: g, member: m, offsets: offs})
	for _, o := range offs {
		c.offsets[g] = append(c.offsets[g], request.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, CommitTimeMs: now.UnixMilli()})
	}
	return now, nil
}

func (c *coordinator) FetchOffsets(_ context.Context, g string, parts []request.GroupPartition) ([]request.CommittedOffset, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	have := slices.Clone(c.offsets[g])
	if len(parts) == 0 {
		return have, nil
	}
	var out []request.CommittedOffset
	for _, p := range parts {
		o := request.CommittedOffset{Topic: p.Topic, Partition: p.Partition, Offset: -1, LeaderEpoch: -1}
		for _, h := range have {
			if h.Topic == p.Topic && h.Partition == p.Partition {
				o = h
			}
		}
		out = append(out, o)
	}
	return out, nil
}

func (c *coordinator) DeleteGroup(_ context.Context, g string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members[g] > 0 {
		return group.ErrNonEmptyGroup
	}
	c.deleted = append(c.deleted, g)
	return nil
}

// DeleteOffsets refuses a group with no offsets, and topic "busy"'s
// partitions as subscribed to (code 86), and deletes the others.
func (c *coordinator) DeleteOffsets(_ context.Context, g string, topics []request.TopicPartitions) ([]request.PartitionResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offsets[g] == nil {
		return nil, fmt.Errorf("%w: %q", errNoGroup, g)
	}
	var out []request.PartitionResult
	for _, t := range topics {
		c.offsetDeletes = append(c.offsetDeletes, g+" "+t.Topic)
		for _, p := range t.Partitions {
			r := request.PartitionResult{Topic: t.Topic, Partition: p}
			if t.Topic == "busy" {
				r.Err = &request.Error{Code: 86, Message: "subscribed"}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// grants allows User:alice what it lists, as "OPERATION TYPE name".
type grants []string

func (g grants) Authorize(r auth.Request) bool {
	return r.Principal == "User:alice" && slices.Contains(g, strings.ToUpper(fmt.Sprintf("%s %s", r.Operation, r.ResourceType))+" "+r.ResourceName)
}

func (g grants) AuthorizeAny(string, auth.Operation, auth.ResourceType) bool { return false }

// groupCodes adds the codes of the group and security calls to codes.
func groupCodes(err error) int32 {
	switch {
	case errors.Is(err, request.ErrGroupAuthorizationFailed):
		return 30
	case errors.Is(err, request.ErrClusterAuthorizationFailed):
		return 31
	case errors.Is(err, request.ErrInvalidTopic):
		return 17
	case errors.Is(err, errUnknownMember):
		return 25
	case errors.Is(err, errNoGroup):
		return 69
	case errors.Is(err, group.ErrNonEmptyGroup):
		return 68
	}
	return codes(err)
}

// offsetLister answers partitions led elsewhere: log start 10, high
// watermark 50, and 20 for any timestamp.
type offsetLister struct {
	mu    sync.Mutex
	asked map[int32]int
}

func (l *offsetLister) ListOffset(_ context.Context, leader int32, p request.ListOffsetsPartition) (request.ListOffsetsResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked[leader]++
	res := request.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: 20}
	switch p.Timestamp {
	case request.EarliestTimestamp:
		res.Offset = 10
	case request.LatestTimestamp:
		res.Offset = 50
	}
	return res, nil
}

type groupFixture struct {
	fixture
	coord  *coordinator
	lister *offsetLister
}

func newGroupCore(t *testing.T, z request.Authorizer) groupFixture {
	coord := &coordinator{offsets: map[string][]request.CommittedOffset{}, members: map[string]int{}}
	lister := &offsetLister{asked: map[int32]int{}}
	f := newCore(t, func(c *request.Config) {
		c.Groups, c.OffsetLister, c.Codes = coord, lister, groupCodes
		c.Authorizer = z
	})
	return groupFixture{fixture: f, coord: coord, lister: lister}
}

func alice(t *testing.T) context.Context { return request.WithPrincipal(ctxT(t), "User:alice") }

// Each group call needs what Kafka's needs: Read on the group to commit
// or take part (and Read, or Describe, on the topics), Describe to see
// it, Delete to delete it; a refusal is the group's or the topic's
// authorization error, and nothing reaches the coordinator.
func TestCoreGroupCallsAuthorized(t *testing.T) {
	t.Parallel()
	commit := &request.CommitOffsetsRequest{Group: "g", MemberID: "m", MemberEpoch: 3,
		Offsets: []request.OffsetCommit{{Topic: "t", Partition: 0, Offset: 7, LeaderEpoch: -1}}}
	hb := &request.GroupHeartbeat{Group: "g", Subscription: &request.GroupSubscription{Topics: []string{"t"}}}
	calls := []struct {
		name  string
		call  func(c *request.Core, ctx context.Context) error
		needs []string // each alone refused, all granted allowed
	}{
		{"commit", func(c *request.Core, ctx context.Context) error { _, err := c.CommitOffsets(ctx, commit); return err },
			[]string{"READ GROUP g", "READ TOPIC t"}},
		{"fetch", func(c *request.Core, ctx context.Context) error {
			_, err := c.FetchOffsets(ctx, "g", []request.GroupPartition{{Topic: "t", Partition: 0}})
			return err
		}, []string{"DESCRIBE GROUP g", "DESCRIBE TOPIC t"}},
		{"heartbeat", func(c *request.Core, ctx context.Context) error {
			_, err := c.ConsumerGroupHeartbeat(ctx, hb)
			return err
		},
			[]string{"READ GROUP g", "DESCRIBE TOPIC t"}},
		{"describe", func(c *request.Core, ctx context.Context) error { _, err := c.DescribeGroup(ctx, "g"); return err },
			[]string{"DESCRIBE GROUP g"}},
		{"find coordinator", func(c *request.Core, ctx context.Context) error { return c.AuthorizeFindCoordinator(ctx, "g") },
			[]string{"DESCRIBE GROUP g"}},
		{"delete", func(c *request.Core, ctx context.Context) error { return c.DeleteGroup(ctx, "g") },
			[]string{"DELETE GROUP g"}},
	}
	for _, tc := range calls {
		for i := range tc.needs {
			// Every need but the i-th.
			var z grants
			for j, n := range tc.needs {
				if j != i {
					z = append(z, n)
				}
			}
			f := newGroupCore(t, z)
			err := tc.call(f.core, alice(t))
			want := int32(30)
			if strings.HasSuffix(tc.needs[i], "TOPIC t") {
				want = 29
			}
			if got := code(t, err); got != want {
				t.Errorf("%s without %q: code %d (%v), want %d", tc.name, tc.needs[i], got, err, want)
			}
			if len(f.coord.commits)+len(f.coord.hbs)+len(f.coord.deleted) != 0 {
				t.Errorf("%s without %q reached the coordinator", tc.name, tc.needs[i])
			}
		}
		f := newGroupCore(t, grants(tc.needs))
		f.coord.members["g"] = 0
		if err := tc.call(f.core, alice(t)); err != nil {
			t.Errorf("%s with %v: %v", tc.name, tc.needs, err)
		}
		if err := tc.call(f.core, request.WithPrincipal(ctxT(t), "User:bob")); code(t, err) == 0 {
			t.Errorf("%s as User:bob, granted nothing: allowed", tc.name)
		}
	}
}

// A commit passes the member and its offsets as they are; the offsets
// read back come sorted, those of topics the principal may not describe
// left out of a fetch of every committed offset, and the groups it may
// not describe out of a listing.
func TestCoreGroupCommitFetchList(t *testing.T) {
	t.Parallel()
	f := newGroupCore(t, grants{"READ GROUP g", "READ TOPIC t", "READ TOPIC u", "DESCRIBE GROUP g", "DESCRIBE TOPIC t"})
	ctx := alice(t)
	at, err := f.core.CommitOffsets(ctx, &request.CommitOffsetsRequest{Group: "g", MemberID: "m", MemberEpoch: 4,
		Offsets: []request.OffsetCommit{{Topic: "u", Partition: 0, Offset: 3, LeaderEpoch: -1}, {Topic: "t", Partition: 1, Offset: 9, LeaderEpoch: 2},
			{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: 2, Metadata: "x"}}})
	if err != nil || at.IsZero() {
		t.Fatalf("commit: %v at %v", err, at)
	}
	if c := f.coord.commits; len(c) != 1 || c[0].member != (request.GroupMember{ID: "m", Epoch: 4}) || len(c[0].offsets) != 3 || c[0].offsets[2].Metadata != "x" {
		t.Fatalf("the coordinator got %+v", c)
	}
	all, err := f.core.FetchOffsets(ctx, "g", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Partition != 0 || all[0].Offset != 5 || all[1].Partition != 1 || all[1].Offset != 9 {
		t.Fatalf("every committed offset, u left out: %+v", all)
	}
	groups, err := f.core.ListGroups(ctx)
	if err != nil || len(groups) != 1 || groups[0].Group != "g" {
		t.Fatalf("groups alice may describe: %+v %v", groups, err)
	}

	// A topic name no topic can have is INVALID_TOPIC_EXCEPTION, not
	// passed on; checked after the ACLs, as every call checks.
	_, err = f.core.CommitOffsets(ctx, &request.CommitOffsetsRequest{Group: "g", Offsets: []request.OffsetCommit{{Topic: "a/b", Offset: 1}}})
	if code(t, err) != 29 {
		t.Fatalf("a commit to topic a/b, not granted: %v", err)
	}
	open := newGroupCore(t, nil)
	_, err = open.core.CommitOffsets(ctxT(t), &request.CommitOffsetsRequest{Group: "g", Offsets: []request.OffsetCommit{{Topic: "a/b", Offset: 1}}})
	if code(t, err) != 17 || len(open.coord.commits) != 0 {
		t.Fatalf("a commit to topic a/b: %v", err)
	}
	_, err = f.core.ConsumerGroupHeartbeat(request.WithPrincipal(ctxT(t), "User:alice"), &request.GroupHeartbeat{Group: "g",
		Subscription: &request.GroupSubscription{Topics: []string{"a b"}}})
	if code(t, err) != 29 { // Describe on "a b" is checked first, as the gRPC door did
		t.Fatalf("a heartbeat subscribing to %q: %v", "a b", err)
	}
	g := newGroupCore(t, nil)
	if _, err := g.core.ConsumerGroupHeartbeat(ctxT(t), &request.GroupHeartbeat{Group: "g",
		Subscription: &request.GroupSubscription{Topics: []string{"a b"}}}); code(t, err) != 17 || len(g.coord.hbs) != 0 {
		t.Fatalf("a heartbeat subscribing to %q: %v, %d passed on", "a b", err, len(g.coord.hbs))
	}
}

// An offset reset reads its targets from the leaders (here for
// partition 0, through the OffsetLister for the others), commits as no
// member, and refuses a group with members, or one that gains a member
// before the commit.
func TestCoreResetOffsets(t *testing.T) {
	t.Parallel()
	f := newGroupCore(t, nil)
	ctx := ctxT(t)
	for range 2 {
		if out, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(3)}}}); err != nil || out[0].Err != nil {
			t.Fatalf("produce: %v %+v", err, out)
		}
	}
	got, err := f.core.ResetOffsets(ctx, &request.ResetOffsetsRequest{Group: "g", Topics: []string{"t"}, To: request.ResetLatest})
	if err != nil {
		t.Fatal(err)
	}
	want := []request.ResetOffset{{Topic: "t", Partition: 0, Previous: -1, Offset: 6}, {Topic: "t", Partition: 1, Previous: -1, Offset: 50},
		{Topic: "t", Partition: 2, Previous: -1, Offset: 50}, {Topic: "t", Partition: 3, Previous: -1, Offset: 50}}
	if !slices.Equal(got, want) {
		t.Fatalf("reset to latest: %+v, want %+v", got, want)
	}
	if c := f.coord.commits; len(c) != 1 || c[0].member != (request.GroupMember{}) || len(c[0].offsets) != 4 || c[0].offsets[0].Offset != 6 {
		t.Fatalf("committed %+v", c)
	}
	if f.lister.asked[2] == 0 || f.lister.asked[3] == 0 {
		t.Fatalf("the leaders asked: %v", f.lister.asked)
	}

	// Shifted back from what was committed, held to the log start; a dry
	// run commits nothing.
	got, err = f.core.ResetOffsets(ctx, &request.ResetOffsetsRequest{Group: "g", To: request.ResetShiftBy, Value: -45, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Previous != 6 || got[0].Offset != 0 || got[1].Previous != 50 || got[1].Offset != 10 || len(f.coord.commits) != 1 {
		t.Fatalf("shift by -45, dry run: %+v, %d commits", got, len(f.coord.commits))
	}

	for _, tc := range []struct {
		name string
		req  request.ResetOffsetsRequest
		want int32
	}{
		{"no target", request.ResetOffsetsRequest{Group: "g", Topics: []string{"t"}}, 42},
		{"negative offset", request.ResetOffsetsRequest{Group: "g", Topics: []string{"t"}, To: request.ResetToOffset, Value: -1}, 42},
		{"unknown topic", request.ResetOffsetsRequest{Group: "g", Topics: []string{"nope"}, To: request.ResetEarliest}, 3},
		{"nothing committed, no topic", request.ResetOffsetsRequest{Group: "new", To: request.ResetEarliest}, 42},
	} {
		if _, err := f.core.ResetOffsets(ctx, &tc.req); code(t, err) != tc.want {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.want)
		}
	}

	f.coord.members["busy"] = 1
	if _, err := f.core.ResetOffsets(ctx, &request.ResetOffsetsRequest{Group: "busy", Topics: []string{"t"}, To: request.ResetEarliest}); code(t, err) != 68 {
		t.Fatalf("a group with a member: %v", err)
	}
	f.coord.joinOnCommit = true
	if _, err := f.core.ResetOffsets(ctx, &request.ResetOffsetsRequest{Group: "g", Topics: []string{"t"}, To: request.ResetEarliest}); code(t, err) != 68 {
		t.Fatalf("a member joining before the commit: %v", err)
	}
}

// A reset with no topic named needs Read on each topic committed, as it
// resets it.
func TestCoreResetOffsetsAuthorizesCommittedTopics(t *testing.T) {
	t.Parallel()
	f := newGroupCore(t, grants{"READ GROUP g"})
	f.coord.offsets["g"] = []request.CommittedOffset{{Topic: "t", Partition: 1, Offset: 30}}
	_, err := f.core.ResetOffsets(alice(t), &request.ResetOffsetsRequest{Group: "g", To: request.ResetEarliest})
	if code(t, err) != 29 || len(f.coord.commits) != 0 {
		t.Fatalf("reset of t without Read on it: %v, %d commits", err, len(f.coord.commits))
	}
	f = newGroupCore(t, grants{"READ GROUP g", "READ TOPIC t"})
	f.coord.offsets["g"] = []request.CommittedOffset{{Topic: "t", Partition: 1, Offset: 30}}
	got, err := f.core.ResetOffsets(alice(t), &request.ResetOffsetsRequest{Group: "g", To: request.ResetEarliest})
	if err != nil || len(got) != 1 || got[0].Previous != 30 || got[0].Offset != 10 {
		t.Fatalf("reset of t: %+v %v", got, err)
	}
}

// A core without a coordinator refuses the group calls with a clear
// error rather than failing on a nil.
func TestCoreGroupsWithoutCoordinator(t *testing.T) {
	t.Parallel()
	f := newCore(t, nil)
	if _, err := f.core.DescribeGroup(ctxT(t), "g"); code(t, err) != 42 {
		t.Fatalf("describe with no coordinator: %v", err)
	}
}
