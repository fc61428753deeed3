package coordinator

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/metadata"
)

// fsmLog is the metadata log of one controller without raft: each command
// is applied to a real FSM at the next index, so the image the
// coordinator reads back is the one the controller's would be.
type fsmLog struct {
	t     *testing.T
	mu    sync.Mutex
	fsm   *metadata.FSM
	index uint64
	// term is what Term answers (from 1): a test moves it on to start a
	// new leadership term.
	term atomic.Uint64
	// rising is what LevelRising answers.
	rising bool
	// barrier, if set, is called by Barrier, and its error returned.
	barrier func(ctx context.Context) error
	// hook, if set, is called with each command before it is applied;
	// an error it returns is the write's.
	hook func(ctx context.Context, cmd *pb.Command) error
}

// newFSMLog returns a log whose image is at metadata.version level with
// topic t (one partition).
func newFSMLog(t *testing.T, level int32) *fsmLog {
	t.Helper()
	f, err := metadata.OpenFSM(filepath.Join(t.TempDir(), "metadata.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l := &fsmLog{t: t, fsm: f}
	l.term.Store(1)
	ctx := context.Background()
	if level > 1 { // a new image is at level 1
		if _, err := l.Apply(ctx, &pb.Command{Cmd: &pb.Command_FeatureLevel{FeatureLevel: &pb.FeatureLevel{Name: metadata.MetadataVersionFeature, Level: level}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Apply(ctx, &pb.Command{Cmd: &pb.Command_CreateTopic{CreateTopic: &pb.CreateTopic{Name: "t", TopicId: "id-t",
		Partitions: []*pb.PartitionAssignment{{Partition: 0, Replicas: []int32{1}, Leader: 1, Isr: []int32{1}}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := l.Image().MetadataVersion(); got != level {
		t.Fatalf("metadata.version %d, want %d", got, level)
	}
	return l
}

func (l *fsmLog) Active(context.Context) error { return nil }
func (l *fsmLog) Term() uint64                 { return l.term.Load() }
func (l *fsmLog) Image() *metadata.Image       { return l.fsm.Image() }
func (l *fsmLog) LevelRising(*pb.Command) (int32, bool) {
	return metadata.LatestMetadataVersion, l.rising
}

func (l *fsmLog) Barrier(ctx context.Context) error {
	if l.barrier != nil {
		return l.barrier(ctx)
	}
	return nil
}

func (l *fsmLog) Apply(ctx context.Context, cmd *pb.Command) (any, error) {
	if l.hook != nil {
		if err := l.hook(ctx, cmd); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.index++
	resp := l.fsm.ApplyCommand(cmd, l.index)
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// newTestCoordinator returns a coordinator writing to l, on clk (nil:
// the system clock).
func newTestCoordinator(t *testing.T, l Log, clk clock.Clock) *Coordinator {
	t.Helper()
	co, err := New(l, Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return co
}

func join(g, member string) group.Heartbeat {
	return group.Heartbeat{Group: g, MemberID: member, MemberEpoch: group.JoinEpoch, HasOwned: true,
		Subscription: &group.Subscription{Topics: []string{"t"}}, RebalanceTimeout: time.Minute}
}

// groupOf returns the records of group id in the log's image, decoded.
func groupOf(l *fsmLog, id string) (epoch int32, members int) {
	for _, r := range l.Image().GroupMembers(id) {
		switch r := r.(type) {
		case group.GroupEpoch:
			epoch = r.Epoch
		case group.MemberMetadata:
			members++
		}
	}
	return epoch, members
}
