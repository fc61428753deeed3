package metadata

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/quirelog/quire/api/metapb"
)

func registerVersions(id int32, inc string, r VersionRange) *pb.Command {
	cmd := register(id, inc)
	cmd.GetRegisterBroker().MinMetadataVersion, cmd.GetRegisterBroker().MaxMetadataVersion = r.Min, r.Max
	return cmd
}

func featureLevel(level int32) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_FeatureLevel{FeatureLevel: &pb.FeatureLevel{Name: MetadataVersionFeature, Level: level}}}
}

func allocate(id int32, epoch int64) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_AllocateProducerIds{AllocateProducerIds: &pb.AllocateProducerIds{BrokerId: id, BrokerEpoch: epoch}}}
}

// Every command of the envelope has a level this code supports and an
// apply function: a command added to the proto without them fails here.
func TestFSMEveryCommandHasALevel(t *testing.T) {
	t.Parallel()
	oneof := (&pb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("cmd")
	fields := oneof.Fields()
	if fields.Len() < 14 {
		t.Fatalf("the command oneof has %d fields", fields.Len())
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		cmd := &pb.Command{}
		m := cmd.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		level := commandLevel(cmd)
		if level < MetadataVersionBaseline || level > LatestMetadataVersion {
			t.Errorf("command %s (field %d) has level %d", fd.Name(), fd.Number(), level)
			continue
		}
		// At the latest level, an empty command of each type is answered
		// by its apply function (most refuse it), never as unknown.
		tf := newTestFSM(t)
		tf.threeBrokersAt(SupportedMetadataVersions())
		tf.ok(featureLevel(LatestMetadataVersion))
		if err, ok := tf.apply(cmd).(error); ok && errors.Is(err, ErrUnknownCommand) {
			t.Errorf("command %s: %v", fd.Name(), err)
		}
	}
}

// threeBrokersAt registers and unfences brokers 1..3 supporting r.
func (tf *testFSM) threeBrokersAt(r VersionRange) map[int32]int64 {
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = tf.ok(registerVersions(id, "inc", r)).(int64)
		tf.ok(unfence(id, epochs[id]))
	}
	return epochs
}

// A command of a newer release (a oneof field this code has no type for)
// is answered ErrUnknownCommand on every node, without a panic, and
// changes nothing but the applied index.
func TestFSMUnknownCommandNotApplied(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokers()
	tf.ok(createTopic("a", []int32{1, 2}))
	var data []byte
	data = protowire.AppendTag(data, 99, protowire.BytesType)
	data = protowire.AppendBytes(data, []byte{0x08, 0x01})
	before := tf.f.Image()
	tf.index++
	resp := tf.f.Apply(&raft.Log{Index: tf.index, Type: raft.LogCommand, Data: data})
	err, ok := resp.(error)
	if !ok || !errors.Is(err, ErrUnknownCommand) || !strings.Contains(err.Error(), "command field 99") {
		t.Fatalf("unknown command answered %v", resp)
	}
	after := tf.f.Image()
	if !sameImage(before, after) || after.Index() != tf.index {
		t.Fatal("an unknown command changed the image")
	}
	// The FSM goes on applying.
	tf.ok(createTopic("b", []int32{3}))
}

func TestFSMFeatureLevelGatesCommands(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	full := SupportedMetadataVersions()
	epochs := map[int32]int64{
		1: tf.ok(registerVersions(1, "a", full)).(int64),
		2: tf.ok(registerVersions(2, "a", full)).(int64),
		3: tf.ok(register(3, "a")).(int64), // older than feature levels: 1-1
	}
	if v := tf.f.Image().MetadataVersion(); v != MetadataVersionBaseline {
		t.Fatalf("a new store is at %d", v)
	}
	if b, _ := tf.f.Image().Broker(3); b.MetadataVersions != (VersionRange{1, 1}) {
		t.Fatalf("broker 3 registered without a range supports %v", b.MetadataVersions)
	}

	// A level-2 command at level 1: refused, naming the broker without it.
	before := tf.f.Image()
	err, _ := tf.apply(allocate(1, epochs[1])).(error)
	if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "3 (supports 1-1)") {
		t.Fatalf("allocate at level 1: %v", err)
	}
	if !sameImage(before, tf.f.Image()) || tf.f.Image().NextProducerID() != 0 {
		t.Fatal("a refused command changed the image")
	}
	// Level 2 cannot be finalized while broker 3 lacks it.
	tf.rejected(featureLevel(2), ErrFeatureUpdateFailed)

	// Broker 3 comes back upgraded.
	epochs[3] = tf.ok(registerVersions(3, "b", full)).(int64)
	if got := tf.ok(featureLevel(2)); got != int32(2) {
		t.Fatalf("feature level answered %v", got)
	}
	if v := tf.f.Image().MetadataVersion(); v != 2 {
		t.Fatalf("finalized %d", v)
	}
	block := tf.ok(allocate(1, epochs[1])).(ProducerIDBlock)
	next := tf.ok(allocate(2, epochs[2])).(ProducerIDBlock)
	if block != (ProducerIDBlock{BrokerID: 1, First: 0, Size: ProducerIDBlockSize}) || next.First != ProducerIDBlockSize {
		t.Fatalf("blocks %+v then %+v", block, next)
	}
	tf.rejected(allocate(2, epochs[2]-1), ErrStaleEpoch)

	// Now a broker that does not support level 2 cannot register, and
	// levels do not go back or stay.
	tf.rejected(register(4, "old"), ErrUnsupportedVersion)
	tf.rejected(registerVersions(3, "c", VersionRange{1, 1}), ErrUnsupportedVersion)
	tf.rejected(featureLevel(2), ErrFeatureUpdateFailed)
	tf.rejected(featureLevel(1), ErrFeatureUpdateFailed)
	tf.rejected(&pb.Command{Cmd: &pb.Command_FeatureLevel{FeatureLevel: &pb.FeatureLevel{Name: "group.version", Level: 3}}}, ErrFeatureUpdateFailed)
}

func TestFSMSnapshotCarriesFeatureLevel(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "metadata.db")
	f, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tf := &testFSM{t: t, f: f}
	epochs := tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(featureLevel(2))
	tf.ok(allocate(1, epochs[1]))

	snap, err := f.Snapshot()
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
	check := func(what string, img *Image) {
		t.Helper()
		if img.MetadataVersion() != 2 || img.NextProducerID() != ProducerIDBlockSize {
			t.Fatalf("%s: level %d, next producer id %d", what, img.MetadataVersion(), img.NextProducerID())
		}
		if b, _ := img.Broker(2); b.MetadataVersions != SupportedMetadataVersions() {
			t.Fatalf("%s: broker 2 supports %v", what, b.MetadataVersions)
		}
	}
	check("restored", other.f.Image())
	// The restored FSM applies level-2 commands.
	other.index = other.f.Image().Index()
	if b := other.ok(allocate(2, epochs[2])).(ProducerIDBlock); b.First != ProducerIDBlockSize {
		t.Fatalf("block after restore %+v", b)
	}
	f.Close()
	f, err = OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check("reopened", f.Image())
}

// With ManualMetadataVersion the level waits for UpdateMetadataVersion,
// which refuses a level beyond the controller's range or one a registered
// broker lacks.
func TestControllerUpdateMetadataVersion(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, 0, func(cfg *Config) { cfg.ManualMetadataVersion = true })
	n := c.waitController()
	ctx := context.Background()
	full := SupportedMetadataVersions()
	if _, err := n.Ctl().RegisterBroker(ctx, BrokerInfo{ID: 1, Incarnation: "a", Addr: "node1", MetadataVersions: full}); err != nil {
		t.Fatal(err)
	}
	old, err := n.Ctl().RegisterBroker(ctx, BrokerInfo{ID: 2, Incarnation: "a", Addr: "node2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Ctl().AllocateProducerIDs(ctx, 2, old); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("level-2 command at level 1: %v", err)
	}
	if _, err := n.Ctl().UpdateMetadataVersion(ctx, 2); !errors.Is(err, ErrFeatureUpdateFailed) || !strings.Contains(err.Error(), "2 (supports 1-1)") {
		t.Fatalf("raise with broker 2 at 1-1: %v", err)
	}
	if _, err := n.Ctl().UpdateMetadataVersion(ctx, LatestMetadataVersion+1); !errors.Is(err, ErrFeatureUpdateFailed) {
		t.Fatalf("raise beyond the controller's range: %v", err)
	}
	epoch, err := n.Ctl().RegisterBroker(ctx, BrokerInfo{ID: 2, Incarnation: "b", Addr: "node2", MetadataVersions: full})
	if err != nil {
		t.Fatal(err)
	}
	if v := n.Image().MetadataVersion(); v != 1 {
		t.Fatalf("manual level raised to %d", v)
	}
	if got, err := n.Ctl().UpdateMetadataVersion(ctx, 2); err != nil || got != 2 {
		t.Fatalf("raise to 2: %d %v", got, err)
	}
	if _, err := n.Ctl().AllocateProducerIDs(ctx, 2, epoch); err != nil {
		t.Fatalf("level-2 command at level 2: %v", err)
	}
	// An old broker cannot register any more.
	if _, err := n.Ctl().RegisterBroker(ctx, BrokerInfo{ID: 3, Incarnation: "a", Addr: "node3"}); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("old broker registered at level 2: %v", err)
	}
}
