package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// apiSchema is the layout of an API's request body, in every version
// served; the versions from flexibleFrom on are flexible (compact lengths,
// tagged fields at the end of every struct).
type apiSchema struct {
	flexibleFrom int16
	body         *schema
}

// schemas are the request layouts of the APIs served (versions), field
// by field in wire order, as Kafka's message definitions give them; a
// test checks each against kmsg's encoding of every version served.
var schemas = map[int16]apiSchema{
	0: {9, strct[kmsg.ProduceRequest]( // Produce
		fld(kNullString).since(3), // transactional id
		fld(kInt16),               // acks
		fld(kInt32),               // timeout
		arr(strct[kmsg.ProduceRequestTopic](
			fld(kString).in(0, 12), // topic
			fld(kUUID).since(13),   // topic id
			arr(strct[kmsg.ProduceRequestTopicPartition](
				fld(kInt32), // partition
				fld(kBytes), // records
			)),
		)),
	)},
	1: {12, strct[kmsg.FetchRequest]( // Fetch
		fld(kInt32).in(0, 14), // replica id
		fld(kInt32),           // max wait
		fld(kInt32),           // min bytes
		fld(kInt32).since(3),  // max bytes
		fld(kInt8).since(4),   // isolation level
		fld(kInt32).since(7),  // session id
		fld(kInt32).since(7),  // session epoch
		arr(strct[kmsg.FetchRequestTopic](
			fld(kString).in(0, 12),
			fld(kUUID).since(13),
			arr(strct[kmsg.FetchRequestTopicPartition](
				fld(kInt32),           // partition
				fld(kInt32).since(9),  // current leader epoch
				fld(kInt64),           // fetch offset
				fld(kInt32).since(12), // last fetched epoch
				fld(kInt64).since(5),  // log start offset
				fld(kInt32),           // partition max bytes
			)),
		)),
		arr(strct[kmsg.FetchRequestForgottenTopic](
			fld(kString).in(7, 12),
			fld(kUUID).since(13),
			fld(kInt32s), // partitions
		)).since(7),
		fld(kString).since(11), // rack
	)},
	2: {6, strct[kmsg.ListOffsetsRequest]( // ListOffsets
		fld(kInt32),         // replica id
		fld(kInt8).since(2), // isolation level
		arr(strct[kmsg.ListOffsetsRequestTopic](
			fld(kString),
			arr(strct[kmsg.ListOffsetsRequestTopicPartition](
				fld(kInt32),          // partition
				fld(kInt32).since(4), // current leader epoch
				fld(kInt64),          // timestamp
				fld(kInt32).in(0, 0), // max num offsets
			)),
		)),
		fld(kInt32).since(10), // timeout
	)},
	3: {9, strct[kmsg.MetadataRequest]( // Metadata
		arr(strct[kmsg.MetadataRequestTopic](
			fld(kUUID).since(10),
			fld(kNullString), // the name, behind a pointer in every version
		)),
		fld(kInt8).since(4),  // allow auto topic creation
		fld(kInt8).in(8, 10), // include cluster authorized operations
		fld(kInt8).since(8),  // include topic authorized operations
	)},
	apiVersionsKey: {3, strct[kmsg.ApiVersionsRequest](
		fld(kString).since(3),     // client software name
		fld(kString).since(3),     // client software version
		fld(kNullString).since(5), // cluster id
		fld(kInt32).since(5),      // node id
	)},
	21: {2, strct[kmsg.DeleteRecordsRequest]( // DeleteRecords
		arr(strct[kmsg.DeleteRecordsRequestTopic](
			fld(kString),
			arr(strct[kmsg.DeleteRecordsRequestTopicPartition](
				fld(kInt32), // partition
				fld(kInt64), // offset
			)),
		)),
		fld(kInt32), // timeout
	)},
	22: {2, strct[kmsg.InitProducerIDRequest]( // InitProducerId
		fld(kNullString),     // transactional id
		fld(kInt32),          // transaction timeout
		fld(kInt64).since(3), // producer id
		fld(kInt16).since(3), // producer epoch
	)},
	// Transactions (transactions.go).
	24: {3, strct[kmsg.AddPartitionsToTxnRequest]( // AddPartitionsToTxn
		arr(strct[kmsg.AddPartitionsToTxnRequestTransaction]( // the brokers' batch
			fld(kString), // transactional id
			fld(kInt64),  // producer id
			fld(kInt16),  // producer epoch
			fld(kInt8),   // verify only
			arr(strct[kmsg.AddPartitionsToTxnRequestTransactionTopic](
				fld(kString), // topic
				fld(kInt32s), // partitions
			)),
		)).since(4),
		fld(kString).in(0, 3), // transactional id
		fld(kInt64).in(0, 3),  // producer id
		fld(kInt16).in(0, 3),  // producer epoch
		arr(strct[kmsg.AddPartitionsToTxnRequestTopic](
			fld(kString), // topic
			fld(kInt32s), // partitions
		)).in(0, 3),
	)},
	25: {3, strct[kmsg.AddOffsetsToTxnRequest]( // AddOffsetsToTxn
		fld(kString), // transactional id
		fld(kInt64),  // producer id
		fld(kInt16),  // producer epoch
		fld(kString), // group
	)},
	26: {3, strct[kmsg.EndTxnRequest]( // EndTxn
		fld(kString), // transactional id
		fld(kInt64),  // producer id
		fld(kInt16),  // producer epoch
		fld(kInt8),   // commit
	)},
	27: {1, strct[kmsg.WriteTxnMarkersRequest]( // WriteTxnMarkers
		arr(strct[kmsg.WriteTxnMarkersRequestMarker](
			fld(kInt64), // producer id
			fld(kInt16), // producer epoch
			fld(kInt8),  // committed
			arr(strct[kmsg.WriteTxnMarkersRequestMarkerTopic](
				fld(kString), // topic
				fld(kInt32s), // partitions
			)),
			fld(kInt32), // coordinator epoch
		)),
	)},
	28: {3, strct[kmsg.TxnOffsetCommitRequest]( // TxnOffsetCommit
		fld(kString),              // transactional id
		fld(kString),              // group
		fld(kInt64),               // producer id
		fld(kInt16),               // producer epoch
		fld(kInt32).since(3),      // generation
		fld(kString).since(3),     // member id
		fld(kNullString).since(3), // instance id
		arr(strct[kmsg.TxnOffsetCommitRequestTopic](
			fld(kString), // topic
			arr(strct[kmsg.TxnOffsetCommitRequestTopicPartition](
				fld(kInt32),          // partition
				fld(kInt64),          // offset
				fld(kInt32).since(2), // leader epoch
				fld(kNullString),     // metadata
			)),
		)),
	)},
	65: {0, strct[kmsg.DescribeTransactionsRequest]( // DescribeTransactions
		fld(kStrings), // transactional ids
	)},
	66: {0, strct[kmsg.ListTransactionsRequest]( // ListTransactions
		fld(kStrings),        // state filters
		fld(kInt64s),         // producer id filters
		fld(kInt64).since(1), // duration filter
	)},
	8: {8, strct[kmsg.OffsetCommitRequest]( // OffsetCommit
		fld(kString),              // group
		fld(kInt32).since(1),      // generation
		fld(kString).since(1),     // member id
		fld(kNullString).since(7), // instance id
		fld(kInt64).in(2, 4),      // retention time
		arr(strct[kmsg.OffsetCommitRequestTopic](
			fld(kString).in(0, 9),
			fld(kUUID).since(10),
			arr(strct[kmsg.OffsetCommitRequestTopicPartition](
				fld(kInt32),          // partition
				fld(kInt64),          // offset
				fld(kInt64).in(1, 1), // timestamp
				fld(kInt32).since(6), // leader epoch
				fld(kNullString),     // metadata
			)),
		)),
	)},
	9: {6, strct[kmsg.OffsetFetchRequest]( // OffsetFetch
		fld(kString).in(0, 7), // group
		arr(strct[kmsg.OffsetFetchRequestTopic](
			fld(kString),
			fld(kInt32s), // partitions
		)).in(0, 7),
		arr(strct[kmsg.OffsetFetchRequestGroup](
			fld(kString),              // group
			fld(kNullString).since(9), // member id
			fld(kInt32).since(9),      // member epoch
			arr(strct[kmsg.OffsetFetchRequestGroupTopic](
				fld(kString).in(8, 9),
				fld(kUUID).since(10),
				fld(kInt32s), // partitions
			)),
		)).since(8),
		fld(kInt8).since(7), // require stable
	)},
	10: {3, strct[kmsg.FindCoordinatorRequest]( // FindCoordinator
		fld(kString).in(0, 3),  // key
		fld(kInt8).since(1),    // key type
		fld(kStrings).since(4), // keys
	)},
	68: {0, strct[kmsg.ConsumerGroupHeartbeatRequest]( // ConsumerGroupHeartbeat
		fld(kString),              // group
		fld(kString),              // member id
		fld(kInt32),               // member epoch
		fld(kNullString),          // instance id
		fld(kNullString),          // rack id
		fld(kInt32),               // rebalance timeout
		fld(kStrings),             // subscribed topic names
		fld(kNullString).since(1), // subscribed topic regex
		fld(kNullString),          // server assignor
		arr(strct[kmsg.ConsumerGroupHeartbeatRequestTopic](
			fld(kUUID),
			fld(kInt32s), // partitions
		)),
	)},
	11: {6, strct[kmsg.JoinGroupRequest]( // JoinGroup
		fld(kString),              // group
		fld(kInt32),               // session timeout
		fld(kInt32).since(1),      // rebalance timeout
		fld(kString),              // member id
		fld(kNullString).since(5), // instance id
		fld(kString),              // protocol type
		arr(strct[kmsg.JoinGroupRequestProtocol](
			fld(kString), // name
			fld(kBytes),  // metadata
		)),
		fld(kNullString).since(8), // reason
	)},
	12: {4, strct[kmsg.HeartbeatRequest]( // Heartbeat
		fld(kString),              // group
		fld(kInt32),               // generation
		fld(kString),              // member id
		fld(kNullString).since(3), // instance id
	)},
	13: {4, strct[kmsg.LeaveGroupRequest]( // LeaveGroup
		fld(kString),          // group
		fld(kString).in(0, 2), // member id
		arr(strct[kmsg.LeaveGroupRequestMember](
			fld(kString),              // member id
			fld(kNullString),          // instance id
			fld(kNullString).since(5), // reason
		)).since(3),
	)},
	14: {4, strct[kmsg.SyncGroupRequest]( // SyncGroup
		fld(kString),              // group
		fld(kInt32),               // generation
		fld(kString),              // member id
		fld(kNullString).since(3), // instance id
		fld(kNullString).since(5), // protocol type
		fld(kNullString).since(5), // protocol
		arr(strct[kmsg.SyncGroupRequestGroupAssignment](
			fld(kString), // member id
			fld(kBytes),  // assignment
		)),
	)},
	15: {5, strct[kmsg.DescribeGroupsRequest]( // DescribeGroups
		fld(kStrings),       // groups
		fld(kInt8).since(3), // include authorized operations
	)},
	16: {3, strct[kmsg.ListGroupsRequest]( // ListGroups
		fld(kStrings).since(4), // states filter
		fld(kStrings).since(5), // types filter
	)},
}
