package metadata

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
)

func groupRecordsCmd(recs []group.Record) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_GroupRecords{GroupRecords: GroupRecordsToPB(recs)}}
}

// heartbeat feeds m one heartbeat and logs its records through tf.
func (tf *testFSM) heartbeat(m *group.Machine, hb group.Heartbeat) group.Response {
	tf.t.Helper()
	resp, recs, err := m.Heartbeat(hb)
	if err != nil {
		tf.t.Fatalf("heartbeat %+v: %v", hb, err)
	}
	if len(recs) > 0 {
		tf.ok(groupRecordsCmd(recs))
	}
	return resp
}

func join(g, member string, now time.Time) group.Heartbeat {
	return group.Heartbeat{Group: g, MemberID: member, MemberEpoch: group.JoinEpoch, HasOwned: true,
		Subscription: &group.Subscription{Topics: []string{"t"}}, RebalanceTimeout: time.Minute, Now: now}
}

// Group records are folded into the image (and its store and snapshots)
// so that a new Machine replaying them describes the groups as the one
// that wrote them.
func TestFSMGroupRecordsReplay(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1}, []int32{2}, []int32{3}))
	m, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m.SetTopics(map[string]int32{"t": 3})
	now := time.Unix(1000, 0)
	_, recs, err := m.Heartbeat(join("g", "a", now))
	if err != nil {
		t.Fatal(err)
	}
	// Below metadata.version 2 the command is refused.
	tf.rejected(groupRecordsCmd(recs), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionProducerIDs))
	tf.ok(groupRecordsCmd(recs))
	ra := tf.heartbeat(m, group.Heartbeat{Group: "g", MemberID: "a", MemberEpoch: 1, Now: now})
	tf.heartbeat(m, join("g", "b", now))
	tf.heartbeat(m, join("h", "c", now))
	tf.heartbeat(m, group.Heartbeat{Group: "g", MemberID: "a", MemberEpoch: ra.MemberEpoch, HasOwned: true,
		Owned: ra.Assignment, Now: now})

	want, err := m.Describe("g")
	if err != nil {
		t.Fatal(err)
	}
	replayed := func(img *Image) group.Description {
		t.Helper()
		m2, err := group.New(group.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m2.Replay(img.GroupRecords(), map[string]int32{"t": 3}, now); err != nil {
			t.Fatal(err)
		}
		d, err := m2.Describe("g")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if got := replayed(tf.f.Image()); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed from the image:\n%+v\nwant\n%+v", got, want)
	}
	if got := tf.f.Image().GroupMembers("h"); len(got) != 4 { // epoch, metadata, assignment, target
		t.Fatalf("group h: %d records %+v", len(got), got)
	}
	stored := tf.storedImage()
	if got := replayed(stored); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed from the store:\n%+v\nwant\n%+v", got, want)
	}
	snap, err := tf.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	other := newTestFSM(t)
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := replayed(other.f.Image()); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed from a snapshot:\n%+v\nwant\n%+v", got, want)
	}

	// Batches that do not fit change nothing.
	tf.rejected(groupRecordsCmd([]group.Record{group.MemberAssignment{Group: "g", MemberID: "zz", Epoch: 3}}), ErrInvalidGroupRecords)
	tf.rejected(groupRecordsCmd([]group.Record{group.MemberRemoved{Group: "nope", MemberID: "a"}}), ErrInvalidGroupRecords)
	tf.rejected(groupRecordsCmd([]group.Record{group.GroupDeleted{Group: "g"}}), ErrInvalidGroupRecords)
	tf.rejected(groupRecordsCmd([]group.Record{group.GroupEpoch{Group: "bad\x00id", Epoch: 1}}), ErrInvalidGroupRecords)
	tf.rejected(&pb.Command{Cmd: &pb.Command_GroupRecords{GroupRecords: &pb.GroupRecords{Records: []*pb.GroupRecord{{}}}}}, ErrInvalidGroupRecords)
	tf.rejected(groupRecordsCmd(nil), ErrInvalidGroupRecords)
	// A valid record before a bad one is not applied either.
	tf.rejected(groupRecordsCmd([]group.Record{group.MemberRemoved{Group: "h", MemberID: "c"}, group.MemberRemoved{Group: "h", MemberID: "c"}}), ErrInvalidGroupRecords)

	// Leaving and deleting the group removes its state. The leave says
	// since when the group is empty, which needs metadata.version 4: at
	// 2 it is refused, and applied without the stamp (as the coordinator
	// writes it there).
	_, recs, err = m.Heartbeat(group.Heartbeat{Group: "h", MemberID: "c", MemberEpoch: group.LeaveEpoch, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	stamped := groupRecordsCmd(recs)
	tf.rejected(stamped, ErrUnsupportedVersion)
	dropEmptySince(stamped.GetGroupRecords())
	tf.ok(stamped)
	recs, err = m.Delete("h")
	if err != nil {
		t.Fatal(err)
	}
	tf.ok(groupRecordsCmd(recs))
	if got := tf.f.Image().GroupMembers("h"); got != nil {
		t.Fatalf("deleted group h still has %+v", got)
	}
	if err := tf.f.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketGroupState).Get([]byte("h")) != nil {
			t.Error("deleted group h is still stored")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// listed replays img's group records into a new Machine at now and
// returns its listing of id.
func listed(t *testing.T, img *Image, id string, now time.Time) group.Listing {
	t.Helper()
	m, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Replay(img.GroupRecords(), map[string]int32{"t": 3}, now); err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Groups() {
		if l.Group == id {
			return l
		}
	}
	t.Fatalf("group %s not replayed", id)
	return group.Listing{}
}

// TestFSMGroupEmptySince: the moment a group was left without members
// is in the metadata log (metadata.version 4), in the image, its store
// and snapshots, so that a coordinator rebuilt from any of them, however
// much later, lists the group as empty since that moment, not since its
// own start; a join clears it. Below level 4 a command carrying it is
// refused and nothing changes.
func TestFSMGroupEmptySince(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1}, []int32{2}, []int32{3}))
	tf.ok(featureLevel(MetadataVersionSecurity))
	m, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m.SetTopics(map[string]int32{"t": 3})
	t0 := time.UnixMilli(1_700_000_000_000)
	tf.heartbeat(m, join("g", "a", t0))
	left := t0.Add(5 * time.Second)
	_, recs, err := m.Heartbeat(group.Heartbeat{Group: "g", MemberID: "a", MemberEpoch: group.LeaveEpoch, Now: left})
	if err != nil {
		t.Fatal(err)
	}
	stamped := groupRecordsCmd(recs)
	if commandLevel(stamped) != MetadataVersionGroupEmptySince {
		t.Fatalf("a stamped GroupRecords needs level %d", commandLevel(stamped))
	}
	// Level 3: refused, the group still has its member.
	tf.rejected(stamped, ErrUnsupportedVersion)
	if l := listed(t, tf.f.Image(), "g", t0); l.Members != 1 {
		t.Fatalf("after the refused leave: %+v", l)
	}
	tf.ok(featureLevel(MetadataVersionGroupEmptySince))
	tf.ok(stamped)

	later := left.Add(40 * time.Second)
	if l := listed(t, tf.f.Image(), "g", later); l.Members != 0 || !l.EmptySince.Equal(left) {
		t.Fatalf("replayed from the image at +45s: %+v, want empty since the leave at +5s", l)
	}
	stored := tf.storedImage()
	if l := listed(t, stored, "g", later); !l.EmptySince.Equal(left) {
		t.Fatalf("replayed from the store: %+v", l)
	}
	snap, err := tf.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	other := newTestFSM(t)
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if l := listed(t, other.f.Image(), "g", later); !l.EmptySince.Equal(left) {
		t.Fatalf("replayed from a snapshot: %+v", l)
	}

	// A join clears it; the last member's expiry stamps the Tick's time.
	m2, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Replay(tf.f.Image().GroupRecords(), map[string]int32{"t": 3}, later); err != nil {
		t.Fatal(err)
	}
	tf.heartbeat(m2, join("g", "b", later))
	if l := listed(t, tf.f.Image(), "g", later); l.Members != 1 || !l.EmptySince.IsZero() {
		t.Fatalf("after a join: %+v", l)
	}
	expiry := later.Add(group.DefaultConfig().SessionTimeout)
	tf.ok(groupRecordsCmd(m2.Tick(expiry)))
	if l := listed(t, tf.f.Image(), "g", expiry.Add(time.Hour)); l.Members != 0 || !l.EmptySince.Equal(expiry) {
		t.Fatalf("after the last member expired: %+v, want empty since %v", l, expiry)
	}
}

// TestFSMGroupStaticMembers: a static member's instance id is in the
// metadata log from metadata.version 6 (refused below, nothing changed),
// and a coordinator rebuilt from the image, or from the store, knows the
// instance: its next process takes the member's place without a new
// group epoch.
func TestFSMGroupStaticMembers(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1}, []int32{2}, []int32{3}))
	tf.ok(featureLevel(MetadataVersionGuardedGroupDelete))
	m, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m.SetTopics(map[string]int32{"t": 3})
	t0 := time.UnixMilli(1_700_000_000_000)
	hb := join("g", "a1", t0)
	hb.InstanceID = "host-a"
	_, recs, err := m.Heartbeat(hb)
	if err != nil {
		t.Fatal(err)
	}
	static := groupRecordsCmd(recs)
	if commandLevel(static) != MetadataVersionStaticMembers {
		t.Fatalf("a GroupRecords with an instance id needs level %d", commandLevel(static))
	}
	classic := groupRecordsCmd([]group.Record{group.MemberMetadata{Group: "g", MemberID: "c", SessionTimeout: time.Minute}})
	if commandLevel(classic) != MetadataVersionStaticMembers {
		t.Fatalf("a GroupRecords with a classic member's session timeout needs level %d", commandLevel(classic))
	}
	tf.rejected(static, ErrUnsupportedVersion)
	if len(tf.f.Image().GroupRecords()) != 0 {
		t.Fatal("a refused GroupRecords left records in the image")
	}
	tf.ok(featureLevel(MetadataVersionStaticMembers))
	tf.ok(static)

	stored := tf.storedImage()
	for name, img := range map[string]*Image{"image": tf.f.Image(), "store": stored} {
		m2, err := group.New(group.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m2.Replay(img.GroupRecords(), map[string]int32{"t": 3}, t0); err != nil {
			t.Fatal(err)
		}
		next := join("g", "a2", t0.Add(time.Second))
		next.InstanceID = "host-a"
		resp, _, err := m2.Heartbeat(next)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d, err := m2.Describe("g")
		if err != nil {
			t.Fatal(err)
		}
		if resp.MemberEpoch != 1 || d.Epoch != 1 || len(d.Members) != 1 || d.Members[0].MemberID != "a2" || d.Members[0].InstanceID != "host-a" || len(resp.Assignment) != 3 {
			t.Fatalf("%s: the instance's next process: %+v, group %+v; want a2 in a1's place at epoch 1 with its 3 partitions", name, resp, d)
		}
	}
}

// Image.GroupMember is what a Subscribe stream watches: when a second
// member joins, the first's target shrinks in the image before it has
// given anything up, and the second's target is held by the first until
// the first heartbeats without those partitions; a leave moves the group
// epoch past the remaining member's.
func TestFSMGroupMemberView(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1}, []int32{2}, []int32{3}))
	tf.ok(featureLevel(MetadataVersionProducerIDs))
	m, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m.SetTopics(map[string]int32{"t": 2})
	now := time.Unix(1000, 0)
	tp := func(ps ...int32) []group.TopicPartition {
		var out []group.TopicPartition
		for _, p := range ps {
			out = append(out, group.TopicPartition{Topic: "t", Partition: p})
		}
		return out
	}
	view := func(member string) GroupMemberView {
		t.Helper()
		v, ok := tf.f.Image().GroupMember("g", member)
		if !ok {
			t.Fatalf("member %s not in the image", member)
		}
		return v
	}
	ra := tf.heartbeat(m, join("g", "a", now))
	if v := view("a"); !reflect.DeepEqual(v.Target, tp(0, 1)) || len(v.Held) != 0 || v.Epoch != ra.MemberEpoch {
		t.Fatalf("a alone: %+v", v)
	}
	tf.heartbeat(m, join("g", "b", now))
	va, vb := view("a"), view("b")
	if len(va.Target) != 1 || va.GroupEpoch <= va.Epoch {
		t.Fatalf("a after b joined: %+v, want one partition targeted and the group epoch past a's", va)
	}
	if len(vb.Target) != 1 || !reflect.DeepEqual(vb.Held, vb.Target) {
		t.Fatalf("b after it joined: %+v, want its one target partition held (by a)", vb)
	}
	// a learns of the revocation, then gives the partition up.
	r := tf.heartbeat(m, group.Heartbeat{Group: "g", MemberID: "a", MemberEpoch: ra.MemberEpoch, HasOwned: true, Owned: tp(0, 1), Now: now})
	tf.heartbeat(m, group.Heartbeat{Group: "g", MemberID: "a", MemberEpoch: r.MemberEpoch, HasOwned: true, Owned: va.Target, Now: now})
	if vb := view("b"); len(vb.Held) != 0 {
		t.Fatalf("b after a gave up its partition: %+v, want nothing held", vb)
	}
	tf.heartbeat(m, group.Heartbeat{Group: "g", MemberID: "b", MemberEpoch: group.LeaveEpoch, Now: now})
	if va := view("a"); va.GroupEpoch <= va.Epoch {
		t.Fatalf("a after b left: %+v, want the group epoch past a's", va)
	}
	if _, ok := tf.f.Image().GroupMember("g", "b"); ok {
		t.Fatal("b in the image after it left")
	}
}
