package metadata

import (
	"encoding/binary"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/auth"
)

// MetadataVersionFeature is the one finalized feature: the level of the
// metadata log's command set (KRaft's metadata.version).
const MetadataVersionFeature = "metadata.version"

// metadata.version levels. Each command needs one (commandLevel); a new
// command takes a new level, so that a node is never handed a command it
// does not know: the controller proposes it only once every registered
// broker supports its level and the level is finalized.
const (
	// MetadataVersionBaseline is every command up to DeleteGroup, and
	// FeatureLevel: what a broker older than feature levels knows. A log
	// or store with no finalized level is at it.
	MetadataVersionBaseline int32 = 1
	// MetadataVersionProducerIDs adds AllocateProducerIds and GroupRecords
	// (consumer group membership).
	MetadataVersionProducerIDs int32 = 2
	// MetadataVersionSecurity adds UpsertUserCredential,
	// DeleteUserCredential, CreateAcls and DeleteAcls (SCRAM users and
	// ACLs, security.go), and CommitOffsetsBatch (many groups' commits in
	// one entry).
	MetadataVersionSecurity int32 = 3
	// MetadataVersionOffsetBatches is the level of CommitOffsetsBatch: the
	// same level 3.
	MetadataVersionOffsetBatches = MetadataVersionSecurity
	// MetadataVersionGroupEmptySince adds a field to an existing
	// command: GroupRecords whose GroupEpochRecord carries empty_since_ms
	// (when the group was left without members, so that every
	// coordinator counts the offsets' retention from that moment). An
	// older node would decode the command and drop the field, and its
	// image would then differ from the others' for good; so the
	// coordinator writes it only from this level, and a command carrying
	// it is refused below.
	MetadataVersionGroupEmptySince int32 = 4
	// MetadataVersionGuardedGroupDelete adds a field to an existing
	// command: DeleteGroup's committed_before_ms, with which offsets
	// retention deletes a group's offsets only if none was committed
	// after the moment its decision counted back to. An older node would
	// drop the field and delete where the others refuse.
	MetadataVersionGuardedGroupDelete int32 = 5
	// MetadataVersionStaticMembers adds fields to an existing command:
	// GroupRecords whose GroupMemberMetadata carries instance_id (static
	// membership, group.instance.id) or session_timeout_ms (a classic
	// member's own). Below it the controller hands the group state
	// machine neither, so members are dynamic, with the group's session
	// timeout.
	MetadataVersionStaticMembers int32 = 6
	// MetadataVersionIdempotentWrite adds a value to an existing command:
	// CreateAcls naming the operation IdempotentWrite (which lets a
	// principal call InitProducerId). An older node refuses the ACL where
	// the others store it.
	MetadataVersionIdempotentWrite int32 = 7
	// MetadataVersionFencedCommits adds fields to an existing command:
	// CommitOffsets' member_id and member_epoch, with which the FSM fences
	// a member's commit again as it applies it (applyCommitOffsets). An
	// older node would drop them and store a commit the others refuse;
	// below this level the controller leaves them out and only the
	// coordinator fences.
	MetadataVersionFencedCommits int32 = 8
	// MetadataVersionBrokerBudget adds BrokerBudget: each broker's
	// partition budget (max.partitions.per.broker) in the image, which
	// the controller checks topic creates and partition increases
	// against. Below it no budget is known and none is enforced.
	MetadataVersionBrokerBudget int32 = 9
	// MetadataVersionDeleteOffsets adds DeleteOffsets: the removal of a
	// group's committed offsets of some partitions (Kafka's
	// OffsetDelete).
	MetadataVersionDeleteOffsets int32 = 10
	// MetadataVersionTransactions adds PutTransaction: the transaction
	// coordinator's state of each transactional id, with the offsets a
	// transaction commits.
	MetadataVersionTransactions int32 = 11

	// MetadataVersionReassignment adds ReassignPartitions (partition
	// reassignment: a partition record's adding and removing replicas),
	// CordonBroker (a broker record's cordoned flag) and BrokerThrottle
	// (a broker's replica.reassignment.throttle.bytes.per.second). An
	// older node would drop the new fields and its image would differ for
	// good.
	MetadataVersionReassignment int32 = 12

	// MetadataVersionIncarnations adds fields to existing commands that
	// an older node would drop and so apply otherwise: DeleteTopic's
	// topic_id (only that incarnation of the topic is deleted; an older
	// node would delete whatever topic has the name), and SCRAM
	// credentials set or deleted one mechanism at a time, each with its
	// own salt and iterations, as Kafka's AlterUserScramCredentials does
	// (UpsertUserCredential's mechanisms, DeleteUserCredential's
	// mechanism and UserCredentialRecord's salt_sha512 and
	// iterations_sha512; an older node would replace or delete the whole
	// user).
	MetadataVersionIncarnations int32 = 13
	// MetadataVersionCompaction adds a value to existing commands:
	// CreateTopic and AlterConfigs setting a cleanup.policy that includes
	// compact. An older node takes such a topic for a delete one (its
	// retention would delete what compaction keeps) and refuses the gaps
	// in a compacted leader's log, so below this level the controller
	// refuses the config.
	MetadataVersionCompaction int32 = 14

	// MetadataVersionShareState adds PutShareStates: share-partitions'
	// state (share groups), written by each partition's leader so that
	// the next one goes on from it (sharestate.go). Below it the state is
	// kept in memory only.
	MetadataVersionShareState int32 = 15

	// MetadataVersionShareGroupConfig adds PutShareGroupConfig and
	// DeleteShareGroup (a share group's settings, the deletion of its
	// saved state: sharegroupconfig.go) and, in a share-partition state,
	// the dead letters not yet written and the group's generation.
	MetadataVersionShareGroupConfig int32 = 16

	// MetadataVersionShareOffsets adds AlterShareGroupOffsets: setting
	// the start offset of a share group's share-partitions (Kafka's
	// AlterShareGroupOffsets).
	MetadataVersionShareOffsets int32 = 17

	// MetadataVersionCreateRequestID adds a field to an existing command
	// and record: CreateTopic's request_id (the client's idempotency key,
	// kept with the topic in TopicRecord.request_id), with which a create
	// of a topic that the same request id created is answered with the
	// topic. An older node would drop it and answer TOPIC_ALREADY_EXISTS
	// where the others answer the topic; below this level the controller
	// leaves it out.
	MetadataVersionCreateRequestID int32 = 18

	// MetadataVersionShareDeadLettered adds a field to a share-partition
	// state: how many of its records were archived as dead letters (for
	// describe). An older node would drop it from its image and save the
	// state without it; below this level the node leaves it out.
	MetadataVersionShareDeadLettered int32 = 19

	// LatestMetadataVersion is the highest level this code knows.
	LatestMetadataVersion = MetadataVersionShareDeadLettered
)

// VersionRange is a range of metadata.version levels, both ends included.
// The zero value stands for a broker older than feature levels: 1 to 1.
type VersionRange struct {
	Min, Max int32
}

// SupportedMetadataVersions is the range this code supports.
func SupportedMetadataVersions() VersionRange {
	return VersionRange{Min: MetadataVersionBaseline, Max: LatestMetadataVersion}
}

// orBaseline is r, or 1 to 1 for the zero range.
func (r VersionRange) orBaseline() VersionRange {
	if r.Max == 0 {
		return VersionRange{Min: MetadataVersionBaseline, Max: MetadataVersionBaseline}
	}
	return r
}

// Contains reports whether level is in the range.
func (r VersionRange) Contains(level int32) bool {
	r = r.orBaseline()
	return r.Min <= level && level <= r.Max
}

func (r VersionRange) String() string {
	r = r.orBaseline()
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// validate checks a range a node is configured with.
func (r VersionRange) validate() error {
	s := SupportedMetadataVersions()
	if r.Min < s.Min || r.Max > s.Max || r.Min > r.Max {
		return fmt.Errorf("metadata: metadata.version range %d-%d: this code supports %s", r.Min, r.Max, s)
	}
	return nil
}

// commandLevel is the metadata.version a command needs, 0 for a command
// this code does not know (a oneof field it has no type for). Adding a
// command to the Command envelope means adding it here with its level;
// TestFSMEveryCommandHasALevel fails until it is. A field added later to
// a command raises the level of a command that sets it.
func commandLevel(cmd *pb.Command) int32 {
	switch c := cmd.Cmd.(type) {
	case *pb.Command_GroupRecords:
		switch {
		case groupRecordsStatic(c.GroupRecords):
			return MetadataVersionStaticMembers
		case groupRecordsStampEmpty(c.GroupRecords):
			return MetadataVersionGroupEmptySince
		}
		return MetadataVersionProducerIDs
	case *pb.Command_DeleteGroup:
		if c.DeleteGroup.CommittedBeforeMs != 0 {
			return MetadataVersionGuardedGroupDelete
		}
		return MetadataVersionBaseline
	case *pb.Command_DeleteTopic:
		if c.DeleteTopic.TopicId != "" {
			return MetadataVersionIncarnations
		}
		return MetadataVersionBaseline
	case *pb.Command_UpsertUserCredential:
		if r := c.UpsertUserCredential.GetCredential(); len(c.UpsertUserCredential.Mechanisms) > 0 || len(r.GetSaltSha512()) > 0 || r.GetIterationsSha512() != 0 {
			return MetadataVersionIncarnations
		}
		return MetadataVersionSecurity
	case *pb.Command_DeleteUserCredential:
		if c.DeleteUserCredential.Mechanism != "" {
			return MetadataVersionIncarnations
		}
		return MetadataVersionSecurity
	case *pb.Command_CreateTopic:
		switch {
		case c.CreateTopic.RequestId != "":
			return MetadataVersionCreateRequestID
		case compactPolicy(c.CreateTopic.Configs):
			return MetadataVersionCompaction
		}
		return MetadataVersionBaseline
	case *pb.Command_AlterConfigs:
		if compactPolicy(c.AlterConfigs.Set) {
			return MetadataVersionCompaction
		}
		return MetadataVersionBaseline
	case *pb.Command_RegisterBroker, *pb.Command_FenceBroker, *pb.Command_UnfenceBroker,
		*pb.Command_PartitionChange, *pb.Command_CreatePartitions, *pb.Command_ControllerChange,
		*pb.Command_UnregisterBroker, *pb.Command_FeatureLevel:
		return MetadataVersionBaseline
	case *pb.Command_CommitOffsets:
		if c.CommitOffsets.MemberId != "" {
			return MetadataVersionFencedCommits
		}
		return MetadataVersionBaseline
	case *pb.Command_AllocateProducerIds:
		return MetadataVersionProducerIDs
	case *pb.Command_PutTransaction:
		return MetadataVersionTransactions
	case *pb.Command_CreateAcls:
		level := MetadataVersionSecurity
		for _, a := range c.CreateAcls.Acls {
			// An older node's authorizer would refuse what these name.
			if strings.EqualFold(a.ResourceType, string(auth.ResourceTransactionalID)) {
				level = max(level, MetadataVersionTransactions)
			}
			if strings.EqualFold(a.Operation, string(auth.OpIdempotentWrite)) {
				level = max(level, MetadataVersionIdempotentWrite)
			}
		}
		return level
	case *pb.Command_DeleteAcls:
		return MetadataVersionSecurity
	case *pb.Command_CommitOffsetsBatch:
		for _, cm := range c.CommitOffsetsBatch.Commits {
			if cm.MemberId != "" {
				return MetadataVersionFencedCommits
			}
		}
		return MetadataVersionOffsetBatches
	case *pb.Command_BrokerBudget:
		return MetadataVersionBrokerBudget
	case *pb.Command_DeleteOffsets:
		return MetadataVersionDeleteOffsets
	case *pb.Command_ReassignPartitions, *pb.Command_CordonBroker, *pb.Command_BrokerThrottle:
		return MetadataVersionReassignment
	case *pb.Command_PutShareStates:
		// Pending dead letters and the group's generation came with 16,
		// the dead-letter count with 19: an older node would drop them
		// from its image.
		level := MetadataVersionShareState
		for _, s := range c.PutShareStates.States {
			if s.DeadLettered != 0 {
				return MetadataVersionShareDeadLettered
			}
			if len(s.DeadLetters) > 0 || s.GroupGeneration != 0 {
				level = MetadataVersionShareGroupConfig
			}
		}
		return level
	case *pb.Command_PutShareGroupConfig, *pb.Command_DeleteShareGroup:
		return MetadataVersionShareGroupConfig
	case *pb.Command_AlterShareGroupOffsets:
		return MetadataVersionShareOffsets
	}
	return 0
}

// compactPolicy reports whether configs set a cleanup.policy that
// includes compact.
func compactPolicy(configs map[string]string) bool {
	v, ok := configs["cleanup.policy"]
	return ok && strings.Contains(strings.ToLower(v), "compact")
}

// commandName names a command for errors: its type, or the field numbers
// of one this code does not know.
func commandName(cmd *pb.Command) string {
	if cmd.Cmd != nil {
		return strings.TrimPrefix(fmt.Sprintf("%T", cmd.Cmd), "*metapb.Command_")
	}
	var fields []string
	for b := cmd.ProtoReflect().GetUnknown(); len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			break
		}
		b = b[m:]
		fields = append(fields, fmt.Sprint(num))
	}
	if len(fields) == 0 {
		return "empty command"
	}
	return "command field " + strings.Join(fields, ",")
}

// lackingBrokers lists the registered brokers (fenced ones too: they come
// back with the same code) whose range does not hold level, as "3 (1-1)".
func lackingBrokers(img *Image, level int32) []string {
	var out []string
	for _, b := range img.Brokers() {
		if !b.MetadataVersions.Contains(level) {
			out = append(out, fmt.Sprintf("%d (supports %s)", b.ID, b.MetadataVersions))
		}
	}
	return out
}

// checkCommandLevel refuses a command that needs a level above img's
// finalized one, naming the brokers that keep it from being raised.
func checkCommandLevel(img *Image, cmd *pb.Command) error {
	need := commandLevel(cmd)
	if need == 0 {
		return fmt.Errorf("%w: %s", ErrUnknownCommand, commandName(cmd))
	}
	have := img.metadataVersion()
	if need <= have {
		return nil
	}
	hint := fmt.Sprintf("every broker supports it: raise it with `quire cluster features --upgrade %d`", need)
	if lack := lackingBrokers(img, need); len(lack) > 0 {
		hint = fmt.Sprintf("brokers without level %d: %s (upgrade them first)", need, strings.Join(lack, ", "))
	}
	return fmt.Errorf("%w: %s needs %s %d, the cluster is at %d; %s", ErrUnsupportedVersion, commandName(cmd), MetadataVersionFeature, need, have, hint)
}

// applyFeatureLevel raises a finalized feature level. Like the
// controller's check before proposing it, it refuses a level that does not
// rise or that a registered broker does not support, so a registration
// racing the change cannot leave a broker behind the level.
func (d *draft) applyFeatureLevel(c *pb.FeatureLevel, _ uint64) any {
	if c.Name != MetadataVersionFeature {
		return fmt.Errorf("%w: unknown feature %q", ErrFeatureUpdateFailed, c.Name)
	}
	if have := d.img.metadataVersion(); c.Level <= have {
		return fmt.Errorf("%w: %s %d is not above the finalized %d", ErrFeatureUpdateFailed, c.Name, c.Level, have)
	}
	if lack := lackingBrokers(d.img, c.Level); len(lack) > 0 {
		return fmt.Errorf("%w: %s %d: brokers without it: %s", ErrFeatureUpdateFailed, c.Name, c.Level, strings.Join(lack, ", "))
	}
	d.img.finalizedVersion = c.Level
	d.must(d.tx.Bucket(bucketMeta).Put(keyMetadataVersion, binary.BigEndian.AppendUint32(nil, uint32(c.Level))))
	return c.Level
}

// ProducerIDBlockSize is how many producer ids one AllocateProducerIds
// hands out (Kafka's block size).
const ProducerIDBlockSize = 1000

// ProducerIDBlock is a range of producer ids owned by one broker.
type ProducerIDBlock struct {
	BrokerID int32
	First    int64
	Size     int64
}

// applyAllocateProducerIds hands the broker the next block of producer
// ids.
func (d *draft) applyAllocateProducerIds(c *pb.AllocateProducerIds, _ uint64) any {
	b, ok := d.img.brokers[c.BrokerId]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, c.BrokerId)
	}
	if c.BrokerEpoch != b.Epoch {
		return fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleEpoch, c.BrokerId, c.BrokerEpoch, b.Epoch)
	}
	block := ProducerIDBlock{BrokerID: c.BrokerId, First: d.img.nextProducerID, Size: ProducerIDBlockSize}
	d.img.nextProducerID += ProducerIDBlockSize
	d.must(d.tx.Bucket(bucketMeta).Put(keyNextProducerID, binary.BigEndian.AppendUint64(nil, uint64(d.img.nextProducerID))))
	return block
}
