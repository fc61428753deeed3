package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	pb "github.com/quirelog/quire/api/metapb"
)

func TestFSMRestoreCorruptSnapshotKeepsStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "metadata.db")
	f, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close() }()
	tf := &testFSM{t: t, f: f}
	tf.threeBrokers()
	tf.ok(createTopic("a", []int32{1, 2}))
	want := f.Image()

	// A snapshot of a store of another schema version.
	other := newTestFSM(t)
	other.threeBrokers()
	if err := other.f.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyVersion, []byte{schemaVersion + 1})
	}); err != nil {
		t.Fatal(err)
	}
	s, err := other.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var newer sink
	if err := s.Persist(&newer); err != nil {
		t.Fatal(err)
	}
	s.Release()

	for name, snap := range map[string][]byte{
		"garbage": bytes.Repeat([]byte{0xde, 0xad}, 8192),
		"empty":   nil,
		"newer":   newer.Bytes(),
	} {
		err := f.Restore(io.NopCloser(bytes.NewReader(snap)))
		if err == nil {
			t.Fatalf("%s snapshot restored", name)
		}
		if !strings.Contains(err.Error(), "current image kept") {
			t.Fatalf("%s snapshot: %v", name, err)
		}
		if f.Image() != want {
			t.Fatalf("%s snapshot: the image changed", name)
		}
		if _, err := os.Stat(path + ".restore"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s snapshot: the restore copy is left behind: %v", name, err)
		}
	}
	// The store is still usable: it applies, and reopens with what it
	// applied.
	tf.ok(createTopic("b", []int32{3}))
	topics := f.Image().Topics()
	if len(topics) != 2 {
		t.Fatalf("topics after the failed restores: %+v", topics)
	}
	f.Close()
	f, err = OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Image().Topics(), topics) || f.Image().Index() != tf.index {
		t.Fatal("reopened store differs from the image kept")
	}
}

// gatedSink is a raft.SnapshotSink whose writes wait until open is closed:
// a snapshot written to a slow disk or peer.
type gatedSink struct {
	open chan struct{}
	buf  bytes.Buffer
}

func (s *gatedSink) Write(p []byte) (int, error) {
	<-s.open
	return s.buf.Write(p)
}
func (s *gatedSink) ID() string    { return "gated" }
func (s *gatedSink) Cancel() error { return nil }
func (s *gatedSink) Close() error  { return nil }

// bulkCommit is a commit of 4 KiB of metadata on each of n partitions of
// topic t by group g: about 4 KiB x n in the store.
func bulkCommit(g, t string, n int) *pb.Command {
	meta := strings.Repeat("m", MaxOffsetMetadataLen)
	c := &pb.CommitOffsets{Group: g, CommitTimeMs: 1}
	for p := range n {
		c.Offsets = append(c.Offsets, &pb.OffsetCommit{Topic: t, Partition: int32(p), Offset: 1, LeaderEpoch: -1, Metadata: meta})
	}
	return &pb.Command{Cmd: &pb.Command_CommitOffsets{CommitOffsets: c}}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// A snapshot being written to a slow sink must not stall Apply, also when
// the store grows past its mmap meanwhile (bbolt's remap waits for every
// open read transaction).
func TestFSMSnapshotDoesNotStallApply(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "metadata.db")
	// A small initial mapping, so that a store of a few MiB outgrows it:
	// the remap is what a slow snapshot must not hold up, whatever the
	// sizes (the default mapping, 64 MiB, would take 130 MiB of writes).
	const initialMmap = 4 << 20
	f, err := openFSM(path, nil, initialMmap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tf := &testFSM{t: t, f: f}
	tf.threeBrokers()
	const parts = 64 // 256 KiB a commit
	assign := make([][]int32, parts)
	for i := range assign {
		assign[i] = []int32{1}
	}
	tf.ok(createTopic("t", assign...))
	tf.ok(bulkCommit("before", "t", parts))
	// Bulk the store up to 6 MiB straight in bbolt (a bucket the image
	// does not read), faster than through commands.
	if err := f.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("test-padding"))
		if err != nil {
			return err
		}
		for i := range 6 {
			if err := b.Put([]byte{byte(i)}, make([]byte, 1<<20)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// bbolt maps the power of two at or above the file size, at least
	// the initial mapping (the file may have grown since: this is an
	// upper bound).
	mapped := int64(initialMmap)
	for mapped < fileSize(t, path) {
		mapped *= 2
	}
	groupsBefore := f.Image().Groups()
	t.Logf("store %d MiB, mapped %d MiB", fileSize(t, path)>>20, mapped>>20)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &gatedSink{open: make(chan struct{})}
	persisted := make(chan error, 1)
	go func() { persisted <- snap.Persist(sink) }()

	applied := make(chan error, 1)
	go func() {
		for g := 0; ; g++ {
			// The pages in use (not the file, which bbolt grows ahead
			// in steps of 16 MiB): past the mapping, it was remapped.
			var used int64
			if err := f.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
				applied <- err
				return
			}
			if used > mapped {
				applied <- nil
				return
			}
			tf.index++
			if resp := f.ApplyCommand(bulkCommit(fmt.Sprintf("after-%d", g), "t", parts), tf.index); resp != nil {
				applied <- fmt.Errorf("commit %d: %v", g, resp)
				return
			}
		}
	}()
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute): // a stalled Apply waits for the sink forever
		close(sink.open)
		<-persisted
		snap.Release()
		<-applied
		t.Fatal("Apply stalled while a snapshot was being written")
	}
	close(sink.open)
	if err := <-persisted; err != nil {
		t.Fatal(err)
	}
	snap.Release()

	other := newTestFSM(t)
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(sink.buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := other.f.Image().Groups(); !reflect.DeepEqual(got, groupsBefore) {
		t.Fatalf("snapshot holds groups %v, want those before it: %v", got, groupsBefore)
	}
}
