package metadata

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	pb "github.com/quirelog/quire/api/metapb"
)

// apply is the one switch from a command to its apply function. Each
// function validates first and only then changes the draft, so a rejected
// command leaves the image as it was. A command this code does not know,
// or one above the finalized metadata.version, is refused first.
func (d *draft) apply(cmd *pb.Command, index uint64) any {
	if err := checkCommandLevel(d.img, cmd); err != nil {
		return err
	}
	switch c := cmd.Cmd.(type) {
	case *pb.Command_RegisterBroker:
		return d.applyRegisterBroker(c.RegisterBroker, index)
	case *pb.Command_FenceBroker:
		return d.applyFenceBroker(c.FenceBroker, index)
	case *pb.Command_UnfenceBroker:
		return d.applyUnfenceBroker(c.UnfenceBroker, index)
	case *pb.Command_CreateTopic:
		return d.applyCreateTopic(c.CreateTopic, index)
	case *pb.Command_DeleteTopic:
		return d.applyDeleteTopic(c.DeleteTopic, index)
	case *pb.Command_PartitionChange:
		return d.applyPartitionChange(c.PartitionChange, index)
	case *pb.Command_AlterConfigs:
		return d.applyAlterConfigs(c.AlterConfigs, index)
	case *pb.Command_CreatePartitions:
		return d.applyCreatePartitions(c.CreatePartitions, index)
	case *pb.Command_ControllerChange:
		return d.applyControllerChange(c.ControllerChange, index)
	case *pb.Command_UnregisterBroker:
		return d.applyUnregisterBroker(c.UnregisterBroker, index)
	case *pb.Command_CommitOffsets:
		return d.applyCommitOffsets(c.CommitOffsets, index)
	case *pb.Command_DeleteGroup:
		return d.applyDeleteGroup(c.DeleteGroup, index)
	case *pb.Command_DeleteOffsets:
		return d.applyDeleteOffsets(c.DeleteOffsets, index)
	case *pb.Command_FeatureLevel:
		return d.applyFeatureLevel(c.FeatureLevel, index)
	case *pb.Command_AllocateProducerIds:
		return d.applyAllocateProducerIds(c.AllocateProducerIds, index)
	case *pb.Command_GroupRecords:
		return d.applyGroupRecords(c.GroupRecords, index)
	case *pb.Command_UpsertUserCredential:
		return d.applyUpsertUserCredential(c.UpsertUserCredential, index)
	case *pb.Command_DeleteUserCredential:
		return d.applyDeleteUserCredential(c.DeleteUserCredential, index)
	case *pb.Command_CreateAcls:
		return d.applyCreateAcls(c.CreateAcls, index)
	case *pb.Command_DeleteAcls:
		return d.applyDeleteAcls(c.DeleteAcls, index)
	case *pb.Command_CommitOffsetsBatch:
		return d.applyCommitOffsetsBatch(c.CommitOffsetsBatch, index)
	case *pb.Command_BrokerBudget:
		return d.applyBrokerBudget(c.BrokerBudget, index)
	case *pb.Command_ReassignPartitions:
		return d.applyReassignPartitions(c.ReassignPartitions, index)
	case *pb.Command_CordonBroker:
		return d.applyCordonBroker(c.CordonBroker, index)
	case *pb.Command_BrokerThrottle:
		return d.applyBrokerThrottle(c.BrokerThrottle, index)
	case *pb.Command_PutTransaction:
		return d.applyPutTransaction(c.PutTransaction, index)
	case *pb.Command_PutShareStates:
		return d.applyPutShareStates(c.PutShareStates, index)
	case *pb.Command_PutShareGroupConfig:
		return d.applyPutShareGroupConfig(c.PutShareGroupConfig, index)
	case *pb.Command_DeleteShareGroup:
		return d.applyDeleteShareGroup(c.DeleteShareGroup, index)
	case *pb.Command_AlterShareGroupOffsets:
		return d.applyAlterShareGroupOffsets(c.AlterShareGroupOffsets, index)
	}
	// commandLevel knows a type this switch does not.
	return fmt.Errorf("%w: %s at index %d has no apply function", ErrUnknownCommand, commandName(cmd), index)
}

// applyRegisterBroker records a (re)started broker with a new epoch. It
// starts fenced: the controller unfences it on its first heartbeat. A
// registration also fences the previous run, moving its leaderships away.
//
// A registration whose directory id differs from the non-empty one
// recorded means the broker's data is gone (a wiped or replaced log
// directory): it leaves every ISR, even one it is the only member of. Such
// a partition is offline: leader -1, leader epoch bumped and an empty ISR,
// meaning no replica is known to hold its committed data. Only an unclean
// election (UnfenceBroker or FenceBroker with unclean set) gives it a
// leader again. An empty directory id is unknown: the recorded one stays.
func (d *draft) applyRegisterBroker(c *pb.RegisterBroker, index uint64) any {
	old, exists := d.img.brokers[c.BrokerId]
	if c.BrokerEpoch != 0 && (!exists || old.Epoch != c.BrokerEpoch) {
		return fmt.Errorf("%w: broker %d registration raced (epoch %d)", ErrStaleEpoch, c.BrokerId, c.BrokerEpoch)
	}
	if c.BrokerId < 0 || c.AdvertisedAddr == "" {
		return fmt.Errorf("%w: broker %d without address", ErrUnknownBroker, c.BrokerId)
	}
	versions := VersionRange{Min: c.MinMetadataVersion, Max: c.MaxMetadataVersion}.orBaseline()
	if have := d.img.metadataVersion(); !versions.Contains(have) {
		return fmt.Errorf("%w: broker %d supports %s %s, the cluster is at %d", ErrUnsupportedVersion, c.BrokerId, MetadataVersionFeature, versions, have)
	}
	dirID := c.DirectoryId
	if dirID == "" {
		dirID = old.DirectoryID
	}
	for _, e := range c.Endpoints {
		if e.Listener == "" || e.Addr == "" {
			return fmt.Errorf("%w: broker %d endpoint %q=%q without listener name or address", ErrUnknownBroker, c.BrokerId, e.Listener, e.Addr)
		}
	}
	b := BrokerInfo{ID: c.BrokerId, Incarnation: c.Incarnation, Addr: c.AdvertisedAddr, Rack: c.Rack, Fenced: true, Epoch: int64(index), DirectoryID: dirID,
		Endpoints: EndpointsFromPB(c.Endpoints), MetadataVersions: versions,
		// Kept until the new run's heartbeats report its own (BrokerBudget).
		MaxPartitions: old.MaxPartitions,
		// An operator's settings outlive a restart.
		Cordoned: old.Cordoned, ReassignmentThrottle: -1}
	if exists {
		b.ReassignmentThrottle = old.ReassignmentThrottle
	}
	d.putBroker(b)
	if exists {
		d.moveAwayFrom(c.BrokerId, false, lostData(old, c.DirectoryId))
	}
	return b.Epoch
}

// lostData reports whether a broker registering with directory id dirID
// has lost the data of its recorded registration old: both ids are known
// and differ.
func lostData(old BrokerInfo, dirID string) bool {
	return old.DirectoryID != "" && dirID != "" && dirID != old.DirectoryID
}

// applyFenceBroker fences a broker and moves its leaderships and ISR
// memberships away.
func (d *draft) applyFenceBroker(c *pb.FenceBroker, _ uint64) any {
	b, ok := d.img.brokers[c.BrokerId]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, c.BrokerId)
	}
	if c.BrokerEpoch != 0 && c.BrokerEpoch != b.Epoch {
		return fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleEpoch, c.BrokerId, c.BrokerEpoch, b.Epoch)
	}
	b.Fenced = true
	d.putBroker(b)
	d.moveAwayFrom(c.BrokerId, c.Unclean, false)
	return nil
}

// moveAwayFrom takes broker id out of every ISR it shares with another
// member and, where it led, elects the first live ISR member in replica
// order; with unclean set and no live ISR member, the first live replica
// (whose ISR then is just itself). With no candidate the leader is -1 and
// the ISR keeps its last member, as Kafka does.
//
// With dataLost the broker's logs are gone, so it leaves even an ISR it is
// the only member of: that partition is offline, with no leader, an empty
// ISR and a bumped leader epoch (also when it had no leader already, so
// that anything still acting on the old epoch is fenced).
func (d *draft) moveAwayFrom(id int32, unclean, dataLost bool) {
	for _, name := range sortedTopicNames(d.img) {
		var t *TopicInfo
		for i := range d.img.topics[name].Partitions {
			p := d.img.topics[name].Partitions[i]
			if !slices.Contains(p.Replicas, id) {
				continue
			}
			isr := p.ISR
			if slices.Contains(isr, id) && (len(isr) > 1 || dataLost) {
				isr = without(isr, id)
			}
			leader := p.Leader
			if leader == id {
				leader = -1
				for _, r := range p.Replicas {
					if r != id && slices.Contains(isr, r) && d.img.isLive(r) {
						leader = r
						break
					}
				}
				if leader == -1 && unclean {
					for _, r := range p.Replicas {
						if r != id && d.img.isLive(r) {
							leader, isr = r, []int32{r}
							break
						}
					}
				}
			}
			if leader == p.Leader && slices.Equal(isr, p.ISR) {
				continue
			}
			if t == nil {
				t, _ = d.topic(name)
			}
			if len(isr) == 0 {
				isr = nil // as a stored record reads back, for identical images
			}
			np := changed(p, leader, isr)
			if isr == nil && np.LeaderEpoch == p.LeaderEpoch {
				np.LeaderEpoch++
			}
			d.putPartition(t, np)
		}
	}
}

// applyUnregisterBroker removes a fenced broker gone for good. Its
// partitions keep it in their replica lists (assignments are kept, as in
// Kafka, until reassigned) but it leaves every ISR, even one it is the only
// member of: that partition goes offline (leader -1, empty ISR, leader
// epoch bumped) unless unclean elects another live replica. This is the
// lost-data treatment: a broker that registers later with the id has no
// recorded directory id to prove it kept the data, so it must not be
// elected from an ISR it was left in.
func (d *draft) applyUnregisterBroker(c *pb.UnregisterBroker, _ uint64) any {
	b, ok := d.img.brokers[c.BrokerId]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, c.BrokerId)
	}
	if c.BrokerEpoch != 0 && c.BrokerEpoch != b.Epoch {
		return fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleEpoch, c.BrokerId, c.BrokerEpoch, b.Epoch)
	}
	if !b.Fenced {
		return fmt.Errorf("%w: broker %d is not fenced", ErrBrokerNotRemovable, c.BrokerId)
	}
	d.moveAwayFrom(c.BrokerId, c.Unclean, true)
	d.deleteBroker(c.BrokerId)
	return nil
}

// applyUnfenceBroker lets a broker lead again and elects it where a
// partition has no leader and it is in the ISR (or, unclean, a replica).
func (d *draft) applyUnfenceBroker(c *pb.UnfenceBroker, _ uint64) any {
	b, ok := d.img.brokers[c.BrokerId]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, c.BrokerId)
	}
	if c.BrokerEpoch != 0 && c.BrokerEpoch != b.Epoch {
		return fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleEpoch, c.BrokerId, c.BrokerEpoch, b.Epoch)
	}
	b.Fenced = false
	d.putBroker(b)
	id := c.BrokerId
	for _, name := range sortedTopicNames(d.img) {
		var t *TopicInfo
		for i := range d.img.topics[name].Partitions {
			p := d.img.topics[name].Partitions[i]
			if p.Leader != -1 || !slices.Contains(p.Replicas, id) {
				continue
			}
			isr := p.ISR
			switch {
			case slices.Contains(isr, id):
			case c.Unclean:
				isr = []int32{id}
			default:
				continue
			}
			if t == nil {
				t, _ = d.topic(name)
			}
			d.putPartition(t, changed(p, id, isr))
		}
	}
	return nil
}

func (d *draft) applyCreateTopic(c *pb.CreateTopic, _ uint64) any {
	if t, ok := d.img.topics[c.Name]; ok {
		if (c.TopicId != "" && t.ID == c.TopicId) || t.CreatedBy(c.RequestId) {
			// The same create, committed twice by a retry across a
			// controller change (the node's own, with the id it picked,
			// or the client's, with its request id): answer it again.
			return t.clone()
		}
		return fmt.Errorf("%w: %q", ErrTopicExists, c.Name)
	}
	if c.Name == "" {
		return fmt.Errorf("%w: empty topic name", ErrInvalidPartitions)
	}
	parts, err := partitionsFrom(c.Name, 0, c.Partitions)
	if err != nil {
		return err
	}
	if err := checkBudgets(d.img, c.Name, replicasOf(parts)); err != nil {
		// The controller checked it too, but two requests planned on
		// the same image may each fit where both do not.
		return err
	}
	t := &TopicInfo{Name: c.Name, ID: c.TopicId, Partitions: parts, Configs: maps.Clone(c.Configs), RequestID: c.RequestId}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	d.putTopic(t)
	for _, p := range parts {
		d.putPartition(t, p)
	}
	return t.clone()
}

// partitionsFrom checks assignments numbered first, first+1, ... and turns
// them into partitions.
func partitionsFrom(topic string, first int32, as []*pb.PartitionAssignment) ([]PartitionInfo, error) {
	if len(as) == 0 {
		return nil, fmt.Errorf("%w: topic %q: no partitions", ErrInvalidPartitions, topic)
	}
	out := make([]PartitionInfo, len(as))
	for i, a := range as {
		if a.Partition != first+int32(i) {
			return nil, fmt.Errorf("%w: topic %q: partition %d out of order", ErrInvalidPartitions, topic, a.Partition)
		}
		if err := checkAssignment(a.Replicas, a.Leader, a.Isr); err != nil {
			return nil, fmt.Errorf("%w: topic %q partition %d: %v", ErrInvalidPartitions, topic, a.Partition, err)
		}
		out[i] = PartitionInfo{Topic: topic, Partition: a.Partition, Replicas: a.Replicas, ISR: a.Isr, Leader: a.Leader}
	}
	return out, nil
}

// checkAssignment: distinct replicas, a non-empty ISR drawn from them, and
// a leader in the ISR (or -1).
func checkAssignment(replicas []int32, leader int32, isr []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("no replicas")
	}
	seen := map[int32]bool{}
	for _, r := range replicas {
		if seen[r] {
			return fmt.Errorf("replica %d twice", r)
		}
		seen[r] = true
	}
	if len(isr) == 0 {
		return fmt.Errorf("empty isr")
	}
	inISR := map[int32]bool{}
	for _, r := range isr {
		if !seen[r] || inISR[r] {
			return fmt.Errorf("isr member %d not a replica or repeated", r)
		}
		inISR[r] = true
	}
	if leader != -1 && !inISR[leader] {
		return fmt.Errorf("leader %d not in isr", leader)
	}
	return nil
}

// applyDeleteTopic removes a topic, and its committed offsets from every
// group.
func (d *draft) applyDeleteTopic(c *pb.DeleteTopic, _ uint64) any {
	t, ok := d.img.topics[c.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	if c.TopicId != "" && t.ID != c.TopicId {
		return fmt.Errorf("%w: topic id %s: topic %q is another incarnation now (id %s)", ErrUnknownTopic, c.TopicId, c.Name, t.ID)
	}
	d.deleteTopic(c.Name)
	return nil
}

// applyPartitionChange is the compare-and-set on a partition used by
// AlterPartition (leader asks for an ISR change) and by the controller
// (preferred leader election).
func (d *draft) applyPartitionChange(c *pb.PartitionChange, _ uint64) any {
	t0, ok := d.img.topics[c.Topic]
	if !ok || c.Partition < 0 || int(c.Partition) >= len(t0.Partitions) {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, c.Topic, c.Partition)
	}
	p := t0.Partitions[c.Partition]
	if c.PartitionEpoch != p.PartitionEpoch || (c.LeaderEpoch >= 0 && c.LeaderEpoch != p.LeaderEpoch) {
		return fmt.Errorf("%w: %s-%d: partition epoch %d leader epoch %d, current %d and %d",
			ErrStaleEpoch, c.Topic, c.Partition, c.PartitionEpoch, c.LeaderEpoch, p.PartitionEpoch, p.LeaderEpoch)
	}
	if err := checkAssignment(p.Replicas, c.Leader, c.Isr); err != nil {
		return fmt.Errorf("%w: %s-%d: %v", ErrInvalidPartitions, c.Topic, c.Partition, err)
	}
	if c.Leader != -1 && c.Leader != p.Leader && !d.img.isLive(c.Leader) {
		return fmt.Errorf("%w: %d cannot lead %s-%d", ErrFencedBroker, c.Leader, c.Topic, c.Partition)
	}
	for _, r := range c.Isr {
		if !slices.Contains(p.ISR, r) && !d.img.isLive(r) {
			return fmt.Errorf("%w: %d cannot join the isr of %s-%d", ErrFencedBroker, r, c.Topic, c.Partition)
		}
	}
	t, _ := d.topic(c.Topic)
	np := changed(p, c.Leader, slices.Clone(c.Isr))
	return d.putPartition(t, np).clone()
}

func (d *draft) applyAlterConfigs(c *pb.AlterConfigs, _ uint64) any {
	if _, ok := d.img.topics[c.Topic]; !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	t, _ := d.topic(c.Topic)
	cfg := maps.Clone(t.Configs)
	if cfg == nil {
		cfg = map[string]string{}
	}
	maps.Copy(cfg, c.Set)
	for _, k := range c.Delete {
		delete(cfg, k)
	}
	t.Configs = cfg
	d.putTopic(t)
	return nil
}

func (d *draft) applyCreatePartitions(c *pb.CreatePartitions, _ uint64) any {
	t0, ok := d.img.topics[c.Topic]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	parts, err := partitionsFrom(c.Topic, int32(len(t0.Partitions)), c.Partitions)
	if err != nil {
		return err
	}
	if err := checkBudgets(d.img, c.Topic, replicasOf(parts)); err != nil {
		return err
	}
	t, _ := d.topic(c.Topic)
	t.Partitions = append(t.Partitions, make([]PartitionInfo, len(parts))...)
	d.putTopic(t)
	for _, p := range parts {
		d.putPartition(t, p)
	}
	return nil
}

func (d *draft) applyControllerChange(c *pb.ControllerChange, _ uint64) any {
	if d.img.clusterID != "" && c.ClusterId != "" && c.ClusterId != d.img.clusterID {
		return fmt.Errorf("%w: node %d has %q, cluster is %q", ErrClusterIDMismatch, c.ControllerId, c.ClusterId, d.img.clusterID)
	}
	meta := d.tx.Bucket(bucketMeta)
	if d.img.clusterID == "" && c.ClusterId != "" {
		d.img.clusterID = c.ClusterId
		d.must(meta.Put(keyClusterID, []byte(c.ClusterId)))
	}
	d.img.controllerID = c.ControllerId
	d.must(meta.Put(keyControllerID, binary.BigEndian.AppendUint32(nil, uint32(c.ControllerId))))
	return nil
}

// changed returns p with a new leader and ISR, bumping the partition epoch,
// and the leader epoch when the leader changes.
func changed(p PartitionInfo, leader int32, isr []int32) PartitionInfo {
	if leader != p.Leader {
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	p.Leader = leader
	p.ISR = isr
	return p
}

func without(s []int32, v int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func sortedTopicNames(img *Image) []string {
	names := make([]string, 0, len(img.topics))
	for n := range img.topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
