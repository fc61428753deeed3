package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/metapb"
)

// FSM is the metadata state machine: the image kept in bbolt, plus an
// immutable in-memory copy published after every applied command.
//
// Apply is deterministic and touches nothing but its own store; it never
// starts goroutines or talks to the network. A command that cannot be
// decoded panics (the log is corrupt). A command that is rejected (stale
// epoch, topic exists, one above the finalized metadata.version, or one
// this code does not know) returns a typed error as the Apply response and
// changes nothing but the applied index.
type FSM struct {
	path   string
	logger hclog.Logger
	// initialMmap is the store's initial memory mapping in bytes
	// (defaultInitialMmap): bbolt remaps, waiting for every open read
	// transaction, each time the store outgrows it.
	initialMmap int

	mu  sync.Mutex // guards db against Restore
	db  *bolt.DB
	img atomic.Pointer[Image]

	// onChange is called after each published image; it must not block.
	onChange func()

	// elections and uncleanElections count the leader elections the
	// commands applied here made (Elections).
	elections, uncleanElections atomic.Uint64
}

// Elections counts the partition leader elections in the commands this
// node applied since it started: a partition given a leader other than
// the one it had (one that was offline included), and among them the
// unclean ones, whose new leader was not in the ISR. Every node applies
// the same commands, so every node counts the same elections.
func (f *FSM) Elections() (elections, unclean uint64) {
	return f.elections.Load(), f.uncleanElections.Load()
}

// OpenFSM opens (or creates) the image store at path. The store is written
// without fsync: it is rebuilt from the raft snapshot and log on restart,
// and already applied indexes are skipped.
func OpenFSM(path string, logger hclog.Logger) (*FSM, error) {
	return openFSM(path, logger, defaultInitialMmap)
}

// defaultInitialMmap is the image store's initial memory mapping: a store
// of up to 64 MiB is never remapped.
const defaultInitialMmap = 64 << 20

// openFSM is OpenFSM with the store's initial memory mapping given; tests
// that need the store to outgrow its mapping ask for a small one rather
// than write 100 MiB.
func openFSM(path string, logger hclog.Logger, initialMmap int) (*FSM, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	f := &FSM{path: path, logger: logger, initialMmap: initialMmap}
	if err := f.open(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) open() error {
	db, img, err := openStore(f.path, f.initialMmap)
	if err != nil {
		return err
	}
	f.db = db
	f.img.Store(img)
	return nil
}

// openStore opens the image store at path, creating what is missing, and
// loads its image.
func openStore(path string, initialMmap int) (*bolt.DB, *Image, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, InitialMmapSize: initialMmap, NoSync: true})
	if err != nil {
		return nil, nil, fmt.Errorf("metadata: open image store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyVersion); v != nil && (len(v) != 1 || v[0] != schemaVersion) {
			return fmt.Errorf("metadata: image store version %v, want %d", v, schemaVersion)
		}
		return meta.Put(keyVersion, []byte{schemaVersion})
	})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("metadata: init image store: %w", err)
	}
	var img *Image
	if err := db.View(func(tx *bolt.Tx) error {
		var lerr error
		img, lerr = loadImage(tx)
		return lerr
	}); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, img, nil
}

// Image returns the current image.
func (f *FSM) Image() *Image { return f.img.Load() }

// Close closes the store.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	return err
}

// Apply implements raft.FSM. A command this code does not know (written
// by a newer node, a oneof field it has no type for) is not applied: the
// response is ErrUnknownCommand, and only the applied index moves, on
// every node alike.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var cmd pb.Command
	if err := proto.Unmarshal(l.Data, &cmd); err != nil {
		panic(fmt.Sprintf("metadata: malformed command at index %d: %v", l.Index, err))
	}
	resp := f.ApplyCommand(&cmd, l.Index)
	if err, ok := resp.(error); ok && errors.Is(err, ErrUnknownCommand) {
		f.logger.Error("metadata log holds a command this node does not know: it was not applied; upgrade this node",
			"index", l.Index, "error", err, "supported", SupportedMetadataVersions().String())
	}
	return resp
}

// ApplyCommand applies one decoded command at a raft index; Apply calls it,
// and tests feed it directly.
func (f *FSM) ApplyCommand(cmd *pb.Command, index uint64) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	base := f.img.Load()
	if index <= base.index {
		// Replayed after a restart: the store already holds it.
		return nil
	}
	tx, err := f.db.Begin(true)
	if err != nil {
		panic(fmt.Sprintf("metadata: image store: %v", err))
	}
	d := newDraft(base, tx)
	resp := d.apply(cmd, index)
	d.img.index = index
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], index)
	d.must(tx.Bucket(bucketMeta).Put(keyAppliedIndex, ib[:]))
	if err := tx.Commit(); err != nil {
		panic(fmt.Sprintf("metadata: image store commit at index %d: %v", index, err))
	}
	f.img.Store(d.img)
	f.elections.Add(d.elections)
	f.uncleanElections.Add(d.uncleanElections)
	if f.onChange != nil {
		f.onChange()
	}
	return resp
}

// Snapshot implements raft.FSM. The view is copied out of a bbolt read
// transaction into an unlinked temporary file at once, and Persist streams
// the copy: a read transaction held for the whole (possibly slow) write of
// the sink would stall every Apply once the store outgrows its mmap, as
// bbolt's remap waits for open read transactions. raft calls Snapshot
// between two Applies, so the copy is the state at one index.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".snapshot-*")
	if err != nil {
		return nil, fmt.Errorf("metadata: snapshot: %w", err)
	}
	// Unlinked while open: a crash leaves nothing behind.
	if err := os.Remove(file.Name()); err != nil {
		file.Close()
		return nil, fmt.Errorf("metadata: snapshot: %w", err)
	}
	err = f.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(file)
		return err
	})
	if err == nil {
		_, err = file.Seek(0, io.SeekStart)
	}
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("metadata: snapshot: %w", err)
	}
	return &fsmSnapshot{file: file}, nil
}

type fsmSnapshot struct {
	file *os.File
	once sync.Once
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := io.Copy(sink, s.file); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("metadata: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {
	s.once.Do(func() { _ = s.file.Close() })
}

// Restore implements raft.FSM: the snapshot replaces the store. The copy
// is opened and loaded before the current store is touched, so a snapshot
// that cannot be used (corrupt, or of an unknown schema version) fails the
// restore and leaves the current store and image in use.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	tmp := f.path + ".restore"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("metadata: restore: %w", err)
	}
	n, err := io.Copy(out, rc)
	if err == nil && n == 0 {
		err = errors.New("empty snapshot, current image kept")
	}
	if err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("metadata: restore: %w", err)
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("metadata: restore: %w", err)
	}
	db, img, err := openStore(tmp, f.initialMmap)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("metadata: restore: snapshot unusable, current image kept: %w", err)
	}
	// The new store stays open across the rename (its descriptor follows
	// the file); the old one, still open on the replaced file, is closed
	// only once the new one is in place.
	if err := os.Rename(tmp, f.path); err != nil {
		db.Close()
		os.Remove(tmp)
		return fmt.Errorf("metadata: restore: current image kept: %w", err)
	}
	old := f.db
	f.db = db
	f.img.Store(img)
	if err := old.Close(); err != nil {
		f.logger.Warn("cannot close the replaced image store", "error", err)
	}
	f.logger.Info("restored metadata image", "index", img.index)
	if f.onChange != nil {
		f.onChange()
	}
	return nil
}

// loadImage reads the whole store into an Image.
func loadImage(tx *bolt.Tx) (*Image, error) {
	img := emptyImage()
	meta := tx.Bucket(bucketMeta)
	if v := meta.Get(keyAppliedIndex); len(v) == 8 {
		img.index = binary.BigEndian.Uint64(v)
	}
	img.clusterID = string(meta.Get(keyClusterID))
	if v := meta.Get(keyControllerID); len(v) == 4 {
		img.controllerID = int32(binary.BigEndian.Uint32(v))
	}
	if v := meta.Get(keyMetadataVersion); len(v) == 4 {
		img.finalizedVersion = int32(binary.BigEndian.Uint32(v))
	}
	if v := meta.Get(keyNextProducerID); len(v) == 8 {
		img.nextProducerID = int64(binary.BigEndian.Uint64(v))
	}
	err := tx.Bucket(bucketBrokers).ForEach(func(_, v []byte) error {
		var r pb.BrokerRecord
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		img.brokers[r.BrokerId] = brokerFromRecord(&r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: load brokers: %w", err)
	}
	err = tx.Bucket(bucketTopics).ForEach(func(_, v []byte) error {
		var r pb.TopicRecord
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		t := &TopicInfo{Name: r.Name, ID: r.TopicId, Configs: r.Configs, Partitions: make([]PartitionInfo, r.PartitionCount), RequestID: r.RequestId}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		img.topics[r.Name] = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: load topics: %w", err)
	}
	err = tx.Bucket(bucketPartitions).ForEach(func(_, v []byte) error {
		var r pb.PartitionRecord
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		t, ok := img.topics[r.Topic]
		if !ok || int(r.Partition) >= len(t.Partitions) {
			return fmt.Errorf("partition %s-%d without topic", r.Topic, r.Partition)
		}
		t.Partitions[r.Partition] = partitionFromRecord(&r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: load partitions: %w", err)
	}
	err = tx.Bucket(bucketOffsets).ForEach(func(_, v []byte) error {
		var r pb.OffsetRecord
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		if t, ok := img.topics[r.Topic]; !ok || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			return fmt.Errorf("offset of group %q for %s-%d without topic", r.Group, r.Topic, r.Partition)
		}
		g := img.groups[r.Group]
		if g == nil {
			g = map[string]map[int32]CommittedOffset{}
			img.groups[r.Group] = g
		}
		if g[r.Topic] == nil {
			g[r.Topic] = map[int32]CommittedOffset{}
		}
		g[r.Topic][r.Partition] = offsetFromRecord(&r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: load offsets: %w", err)
	}
	img.groupStates = map[string]*groupState{}
	err = tx.Bucket(bucketGroupState).ForEach(func(k, v []byte) error {
		var r pb.GroupStateRecord
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		s, err := loadGroupState(&r)
		if err != nil {
			return fmt.Errorf("group %q: %w", k, err)
		}
		img.groupStates[string(k)] = s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: load group state: %w", err)
	}
	if err := loadSecurity(tx, img); err != nil {
		return nil, err
	}
	if err := loadShareStates(tx, img); err != nil {
		return nil, err
	}
	if err := loadShareGroupConfigs(tx, img); err != nil {
		return nil, err
	}
	if err := loadTransactions(tx, img); err != nil {
		return nil, err
	}
	return img, nil
}

func brokerFromRecord(r *pb.BrokerRecord) BrokerInfo {
	return BrokerInfo{ID: r.BrokerId, Incarnation: r.Incarnation, Addr: r.AdvertisedAddr, Rack: r.Rack, Fenced: r.Fenced, Epoch: r.BrokerEpoch, DirectoryID: r.DirectoryId,
		Endpoints:        EndpointsFromPB(r.Endpoints),
		MetadataVersions: VersionRange{Min: r.MinMetadataVersion, Max: r.MaxMetadataVersion}.orBaseline(),
		MaxPartitions:    r.MaxPartitions, Cordoned: r.Cordoned, ReassignmentThrottle: throttleFromRecord(r)}
}

func throttleFromRecord(r *pb.BrokerRecord) int64 {
	if !r.ReassignmentThrottleSet {
		return -1
	}
	return r.ReassignmentThrottle
}

// EndpointsFromPB converts endpoints from their protobuf form (nil for none).
func EndpointsFromPB(in []*pb.Endpoint) []Endpoint {
	if len(in) == 0 {
		return nil
	}
	out := make([]Endpoint, len(in))
	for i, e := range in {
		out[i] = Endpoint{Listener: e.Listener, Addr: e.Addr}
	}
	return out
}

// EndpointsToPB converts endpoints to their protobuf form.
func EndpointsToPB(in []Endpoint) []*pb.Endpoint {
	if len(in) == 0 {
		return nil
	}
	out := make([]*pb.Endpoint, len(in))
	for i, e := range in {
		out[i] = &pb.Endpoint{Listener: e.Listener, Addr: e.Addr}
	}
	return out
}

func brokerRecord(b BrokerInfo) *pb.BrokerRecord {
	return &pb.BrokerRecord{BrokerId: b.ID, Incarnation: b.Incarnation, AdvertisedAddr: b.Addr, Rack: b.Rack, Fenced: b.Fenced, BrokerEpoch: b.Epoch, DirectoryId: b.DirectoryID,
		Endpoints:          EndpointsToPB(b.Endpoints),
		MinMetadataVersion: b.MetadataVersions.Min, MaxMetadataVersion: b.MetadataVersions.Max,
		MaxPartitions: b.MaxPartitions, Cordoned: b.Cordoned,
		ReassignmentThrottleSet: b.ReassignmentThrottle >= 0, ReassignmentThrottle: max(b.ReassignmentThrottle, 0)}
}

func partitionFromRecord(r *pb.PartitionRecord) PartitionInfo {
	return PartitionInfo{
		Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas, ISR: r.Isr,
		Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
		AddingReplicas: r.AddingReplicas, RemovingReplicas: r.RemovingReplicas,
	}
}

func partitionRecord(p PartitionInfo) *pb.PartitionRecord {
	return &pb.PartitionRecord{
		Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas, Isr: p.ISR,
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas,
	}
}

func brokerKey(id int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(id))
}

func partitionKey(topic string, p int32) []byte {
	k := append([]byte(topic), 0)
	return binary.BigEndian.AppendUint32(k, uint32(p))
}

// draft is the image being changed by one command: a copy-on-write clone of
// the published image plus the write transaction that persists each change.
type draft struct {
	img            *Image
	tx             *bolt.Tx
	brokersCloned  bool
	topicsCloned   bool
	ownTopics      map[string]bool // topics already cloned in this draft
	groupsCloned   bool
	ownGroups      map[string]bool     // groups whose topic map is cloned in this draft
	ownGroupTopics map[groupTopic]bool // group topics whose partition map is cloned
	// The leader elections this command made (putPartition).
	elections, uncleanElections uint64
}

func newDraft(base *Image, tx *bolt.Tx) *draft {
	img := *base
	return &draft{img: &img, tx: tx, ownTopics: map[string]bool{}}
}

func (d *draft) must(err error) {
	if err != nil {
		panic(fmt.Sprintf("metadata: image store write: %v", err))
	}
}

func (d *draft) put(bucket, key []byte, m proto.Message) {
	v, err := proto.Marshal(m)
	d.must(err)
	d.must(d.tx.Bucket(bucket).Put(key, v))
}

func (d *draft) putBroker(b BrokerInfo) {
	if !d.brokersCloned {
		d.img.brokers = cloneMap(d.img.brokers)
		d.brokersCloned = true
	}
	d.img.brokers[b.ID] = b
	d.put(bucketBrokers, brokerKey(b.ID), brokerRecord(b))
}

// deleteBroker removes a broker's record.
func (d *draft) deleteBroker(id int32) {
	if !d.brokersCloned {
		d.img.brokers = cloneMap(d.img.brokers)
		d.brokersCloned = true
	}
	delete(d.img.brokers, id)
	d.must(d.tx.Bucket(bucketBrokers).Delete(brokerKey(id)))
}

// topic returns a topic of the draft that may be changed in place.
func (d *draft) topic(name string) (*TopicInfo, bool) {
	t, ok := d.img.topics[name]
	if !ok {
		return nil, false
	}
	if !d.ownTopics[name] {
		if !d.topicsCloned {
			d.img.topics = cloneMap(d.img.topics)
			d.topicsCloned = true
		}
		c := *t
		c.Partitions = slices.Clone(t.Partitions)
		t = &c
		d.img.topics[name] = t
		d.ownTopics[name] = true
	}
	return t, true
}

// putTopic stores the topic record (not its partitions).
func (d *draft) putTopic(t *TopicInfo) {
	if !d.topicsCloned {
		d.img.topics = cloneMap(d.img.topics)
		d.topicsCloned = true
	}
	d.img.topics[t.Name] = t
	d.ownTopics[t.Name] = true
	d.put(bucketTopics, []byte(t.Name), &pb.TopicRecord{
		Name: t.Name, TopicId: t.ID, Configs: t.Configs, PartitionCount: int32(len(t.Partitions)), RequestId: t.RequestID,
	})
}

// putPartition stores one partition of a topic owned by the draft and
// returns what it stored: a partition being reassigned whose target
// replicas are all in the ISR now completes its reassignment on the way
// (completeReassignment), whichever command brought the last one in.
func (d *draft) putPartition(t *TopicInfo, p PartitionInfo) PartitionInfo {
	p = d.completeReassignment(p)
	// An election: a partition that existed (a new one has no replicas
	// yet) gets a leader other than the one it had; unclean when the new
	// leader was not in the ISR.
	if old := t.Partitions[p.Partition]; len(old.Replicas) > 0 && p.Leader >= 0 && p.Leader != old.Leader {
		d.elections++
		if !slices.Contains(old.ISR, p.Leader) {
			d.uncleanElections++
		}
	}
	t.Partitions[p.Partition] = p
	d.put(bucketPartitions, partitionKey(p.Topic, p.Partition), partitionRecord(p))
	return p
}

func (d *draft) deleteTopic(name string) {
	t := d.img.topics[name]
	if !d.topicsCloned {
		d.img.topics = cloneMap(d.img.topics)
		d.topicsCloned = true
	}
	delete(d.img.topics, name)
	d.must(d.tx.Bucket(bucketTopics).Delete([]byte(name)))
	for _, p := range t.Partitions {
		d.must(d.tx.Bucket(bucketPartitions).Delete(partitionKey(name, p.Partition)))
	}
	d.deleteTopicOffsets(name)
	d.deleteTopicShareStates(name)
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
