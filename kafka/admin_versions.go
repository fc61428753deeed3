package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// adminVersions are the admin APIs served (admin.go) and their versions:
// from 0, as Kafka's tools and librdkafka may ask for the oldest, to the
// newest kmsg encodes that names topics by name (DeleteTopics 6 names
// them by name or id: both are answered). They join versions, so
// ApiVersions advertises them and served admits them.
var adminVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: 19, MinVersion: 0, MaxVersion: 7}, // CreateTopics (5: configs in the answer; 7: topic id)
	{ApiKey: 20, MinVersion: 0, MaxVersion: 6}, // DeleteTopics
	{ApiKey: 37, MinVersion: 0, MaxVersion: 3}, // CreatePartitions
	{ApiKey: 32, MinVersion: 0, MaxVersion: 4}, // DescribeConfigs (1: synonyms; 3: types and documentation)
	{ApiKey: 33, MinVersion: 0, MaxVersion: 2}, // AlterConfigs
	{ApiKey: 44, MinVersion: 0, MaxVersion: 1}, // IncrementalAlterConfigs
	{ApiKey: 60, MinVersion: 0, MaxVersion: 2}, // DescribeCluster
	{ApiKey: 42, MinVersion: 0, MaxVersion: 2}, // DeleteGroups
	{ApiKey: 69, MinVersion: 0, MaxVersion: 1}, // ConsumerGroupDescribe (KIP-848)
	{ApiKey: 29, MinVersion: 0, MaxVersion: 3}, // DescribeAcls
	{ApiKey: 30, MinVersion: 0, MaxVersion: 3}, // CreateAcls
	{ApiKey: 31, MinVersion: 0, MaxVersion: 3}, // DeleteAcls
	{ApiKey: 50, MinVersion: 0, MaxVersion: 0}, // DescribeUserScramCredentials
	{ApiKey: 51, MinVersion: 0, MaxVersion: 0}, // AlterUserScramCredentials
	{ApiKey: 61, MinVersion: 0, MaxVersion: 0}, // DescribeProducers
	{ApiKey: 35, MinVersion: 0, MaxVersion: 4}, // DescribeLogDirs (4: the directories' sizes)
	{ApiKey: 43, MinVersion: 0, MaxVersion: 2}, // ElectLeaders
	{ApiKey: 47, MinVersion: 0, MaxVersion: 0}, // OffsetDelete
	{ApiKey: 45, MinVersion: 0, MaxVersion: 1}, // AlterPartitionReassignments (1: allow replication factor change)
	{ApiKey: 46, MinVersion: 0, MaxVersion: 0}, // ListPartitionReassignments
}

// adminSchemas are the request layouts of the admin APIs, as schemas
// gives those of the others (bound.go): their bodies are checked before
// they are decoded like every other request's.
var adminSchemas = map[int16]apiSchema{
	19: {5, strct[kmsg.CreateTopicsRequest]( // CreateTopics
		arr(strct[kmsg.CreateTopicsRequestTopic](
			fld(kString), // topic
			fld(kInt32),  // partitions
			fld(kInt16),  // replication factor
			arr(strct[kmsg.CreateTopicsRequestTopicReplicaAssignment](
				fld(kInt32),  // partition
				fld(kInt32s), // replicas
			)),
			arr(strct[kmsg.CreateTopicsRequestTopicConfig](
				fld(kString),     // name
				fld(kNullString), // value
			)),
		)),
		fld(kInt32),         // timeout
		fld(kInt8).since(1), // validate only
	)},
	20: {4, strct[kmsg.DeleteTopicsRequest]( // DeleteTopics
		fld(kStrings).in(0, 5), // names
		arr(strct[kmsg.DeleteTopicsRequestTopic](
			fld(kNullString), // name
			fld(kUUID),       // id
		)).since(6),
		fld(kInt32), // timeout
	)},
	37: {2, strct[kmsg.CreatePartitionsRequest]( // CreatePartitions
		arr(strct[kmsg.CreatePartitionsRequestTopic](
			fld(kString), // topic
			fld(kInt32),  // count
			arr(strct[kmsg.CreatePartitionsRequestTopicAssignment](
				fld(kInt32s), // replicas
			)),
		)),
		fld(kInt32), // timeout
		fld(kInt8),  // validate only
	)},
	32: {4, strct[kmsg.DescribeConfigsRequest]( // DescribeConfigs
		arr(strct[kmsg.DescribeConfigsRequestResource](
			fld(kInt8),    // resource type
			fld(kString),  // name
			fld(kStrings), // config names
		)),
		fld(kInt8).since(1), // include synonyms
		fld(kInt8).since(3), // include documentation
	)},
	33: {2, strct[kmsg.AlterConfigsRequest]( // AlterConfigs
		arr(strct[kmsg.AlterConfigsRequestResource](
			fld(kInt8),   // resource type
			fld(kString), // name
			arr(strct[kmsg.AlterConfigsRequestResourceConfig](
				fld(kString),     // name
				fld(kNullString), // value
			)),
		)),
		fld(kInt8), // validate only
	)},
	44: {1, strct[kmsg.IncrementalAlterConfigsRequest]( // IncrementalAlterConfigs
		arr(strct[kmsg.IncrementalAlterConfigsRequestResource](
			fld(kInt8),   // resource type
			fld(kString), // name
			arr(strct[kmsg.IncrementalAlterConfigsRequestResourceConfig](
				fld(kString),     // name
				fld(kInt8),       // op
				fld(kNullString), // value
			)),
		)),
		fld(kInt8), // validate only
	)},
	60: {0, strct[kmsg.DescribeClusterRequest]( // DescribeCluster
		fld(kInt8),          // include authorized operations
		fld(kInt8).since(1), // endpoint type
		fld(kInt8).since(2), // include fenced brokers
	)},
	42: {2, strct[kmsg.DeleteGroupsRequest]( // DeleteGroups
		fld(kStrings), // groups
	)},
	69: {0, strct[kmsg.ConsumerGroupDescribeRequest]( // ConsumerGroupDescribe
		fld(kStrings), // groups
		fld(kInt8),    // include authorized operations
	)},
	29: {2, strct[kmsg.DescribeACLsRequest](aclLayout(kNullString)...)},                                         // DescribeAcls
	30: {2, strct[kmsg.CreateACLsRequest](arr(strct[kmsg.CreateACLsRequestCreation](aclLayout(kString)...)))},   // CreateAcls
	31: {2, strct[kmsg.DeleteACLsRequest](arr(strct[kmsg.DeleteACLsRequestFilter](aclLayout(kNullString)...)))}, // DeleteAcls
	50: {0, strct[kmsg.DescribeUserSCRAMCredentialsRequest]( // DescribeUserScramCredentials
		arr(strct[kmsg.DescribeUserSCRAMCredentialsRequestUser](
			fld(kString), // name
		)),
	)},
	51: {0, strct[kmsg.AlterUserSCRAMCredentialsRequest]( // AlterUserScramCredentials
		arr(strct[kmsg.AlterUserSCRAMCredentialsRequestDeletion](
			fld(kString), // name
			fld(kInt8),   // mechanism
		)),
		arr(strct[kmsg.AlterUserSCRAMCredentialsRequestUpsertion](
			fld(kString), // name
			fld(kInt8),   // mechanism
			fld(kInt32),  // iterations
			fld(kBytes),  // salt
			fld(kBytes),  // salted password
		)),
	)},
	61: {0, strct[kmsg.DescribeProducersRequest]( // DescribeProducers
		arr(strct[kmsg.DescribeProducersRequestTopic](
			fld(kString), // topic
			fld(kInt32s), // partitions
		)),
	)},
	35: {2, strct[kmsg.DescribeLogDirsRequest]( // DescribeLogDirs
		arr(strct[kmsg.DescribeLogDirsRequestTopic](
			fld(kString), // topic
			fld(kInt32s), // partitions
		)),
	)},
	43: {2, strct[kmsg.ElectLeadersRequest]( // ElectLeaders
		fld(kInt8).since(1), // election type
		arr(strct[kmsg.ElectLeadersRequestTopic](
			fld(kString), // topic
			fld(kInt32s), // partitions
		)),
		fld(kInt32), // timeout
	)},
	47: offsetDeleteSchema, // OffsetDelete (offset_delete.go)
	45: {0, strct[kmsg.AlterPartitionAssignmentsRequest]( // AlterPartitionReassignments
		fld(kInt32),         // timeout
		fld(kInt8).since(1), // allow replication factor change
		arr(strct[kmsg.AlterPartitionAssignmentsRequestTopic](
			fld(kString), // topic
			arr(strct[kmsg.AlterPartitionAssignmentsRequestTopicPartition](
				fld(kInt32),  // partition
				fld(kInt32s), // replicas (null: cancel)
			)),
		)),
	)},
	46: {0, strct[kmsg.ListPartitionReassignmentsRequest]( // ListPartitionReassignments
		fld(kInt32), // timeout
		arr(strct[kmsg.ListPartitionReassignmentsRequestTopic]( // null: every partition
			fld(kString), // topic
			fld(kInt32s), // partitions
		)),
	)},
}

func init() {
	versions = append(versions, adminVersions...)
	for k, s := range adminSchemas {
		schemas[k] = s
	}
}

// aclLayout is the fields of an ACL binding as Create, Describe and
// DeleteAcls send it: its names are strings in a creation and nullable
// strings in a filter.
func aclLayout(name kind) []field {
	return []field{
		fld(kInt8),          // resource type
		fld(name),           // resource name
		fld(kInt8).since(1), // pattern type
		fld(name),           // principal
		fld(name),           // host
		fld(kInt8),          // operation
		fld(kInt8),          // permission
	}
}
