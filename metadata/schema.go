package metadata

// Every bbolt bucket and fixed key of the metadata image store
// (<Dir>/metadata.db). Values are protobuf records from
// proto/quire/internal/v1/metadata.proto.
var (
	// bucketMeta holds the fixed keys below.
	bucketMeta = []byte("meta")
	// bucketBrokers: 4-byte big-endian broker id -> BrokerRecord.
	bucketBrokers = []byte("brokers")
	// bucketTopics: topic name -> TopicRecord.
	bucketTopics = []byte("topics")
	// bucketPartitions: topic name, 0x00, 4-byte big-endian partition ->
	// PartitionRecord.
	bucketPartitions = []byte("partitions")
	// bucketOffsets: group id, 0x00, topic name, 0x00, 4-byte big-endian
	// partition -> OffsetRecord (consumer group committed offsets). Group
	// ids hold no NUL byte (ErrInvalidGroupID), so one group's keys are a
	// contiguous range. Added after schema version 1 without changing it:
	// opening a store creates any missing bucket, so an older store (or an
	// older snapshot restored) simply has no offsets yet.
	bucketOffsets = []byte("offsets")

	// bucketGroupState: group id -> GroupStateRecord (consumer group
	// membership, folded from GroupRecords). Added like bucketOffsets.
	bucketGroupState = []byte("group_state")

	// bucketUsers: user name -> UserCredentialRecord (SCRAM, security.go).
	// bucketACLs: resource type, pattern type, resource name, principal,
	// permission and operation, NUL-separated -> AclRecord. Added like
	// bucketOffsets.
	bucketUsers = []byte("users")
	bucketACLs  = []byte("acls")

	// bucketTransactions: transactional id -> TransactionState (the
	// transaction coordinator's, transactions.go). Added like
	// bucketOffsets.
	bucketTransactions = []byte("transactions")

	// bucketShareStates: group id, 0x00, topic name, 0x00, 4-byte
	// big-endian partition -> SharePartitionState (share groups,
	// sharestate.go). Added like bucketOffsets.
	bucketShareStates = []byte("share_states")

	// bucketShareGroupConfigs: group id -> ShareGroupConfig (a share
	// group's settings, sharegroupconfig.go). Added like bucketOffsets.
	bucketShareGroupConfigs = []byte("share_group_configs")

	allBuckets = [][]byte{bucketMeta, bucketBrokers, bucketTopics, bucketPartitions, bucketOffsets, bucketGroupState, bucketUsers, bucketACLs, bucketTransactions, bucketShareStates, bucketShareGroupConfigs}
)

var (
	keyAppliedIndex = []byte("applied_index") // 8-byte big-endian raft index
	keyClusterID    = []byte("cluster_id")
	keyControllerID = []byte("controller_id") // 4-byte big-endian
	keyVersion      = []byte("version")       // one byte: schemaVersion
	// keyMetadataVersion: the finalized metadata.version, 4-byte
	// big-endian; absent: MetadataVersionBaseline.
	keyMetadataVersion = []byte("metadata_version")
	// keyNextProducerID: the first producer id not handed out yet, 8-byte
	// big-endian; absent: 0.
	keyNextProducerID = []byte("next_producer_id")
)

const schemaVersion = 1
