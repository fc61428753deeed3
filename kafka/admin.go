package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// Kafka's admin API (kafka-topics.sh, kafka-configs.sh, kafka-acls.sh,
// franz-go's kadm, librdkafka's AdminClient): answered through the
// node's admin, group and security calls, in-process. Each answer follows
// Kafka's conventions: an error per topic, resource, group or ACL filter,
// with a message where the version carries one; a valid request never
// closes the connection.

// AdminBackend is what the admin APIs are answered from: the request
// core (errors that are *request.Error), each call applying the checks
// (and, with the authorizer on, the ACLs) its gRPC call applies.
type AdminBackend interface {
	CreateTopic(ctx context.Context, req *request.CreateTopicRequest) (*request.CreateTopicResult, error)
	// DeleteTopic deletes topic name; with id (the metadata's form of
	// it), only the incarnation with that id: the controller refuses one
	// created again since the id was looked up as an unknown topic.
	DeleteTopic(ctx context.Context, name, id string) error
	CreatePartitions(ctx context.Context, req *request.CreatePartitionsRequest) (*request.CreatePartitionsResult, error)
	// DescribeCluster lists the brokers with an address on the
	// connection's listener (fenced ones flagged), each broker's Info.Addr
	// that address.
	DescribeCluster(ctx context.Context) (*request.ClusterDescription, error)
	// TopicConfigs is every key of a topic, with its source and synonyms.
	TopicConfigs(ctx context.Context, topic string) ([]ConfigEntry, error)
	// BrokerConfigs is every key of the broker named by its id ("" for
	// the cluster-wide defaults); a broker other than this one is an
	// error: a client asks each broker for its own.
	BrokerConfigs(ctx context.Context, broker string) ([]ConfigEntry, error)
	AlterConfigs(ctx context.Context, req *request.AlterConfigsRequest) error
	// GroupConfigs is every key of a share group's settings (the GROUP
	// config resource); AlterGroupConfigs changes them
	// (request/share_config.go).
	GroupConfigs(ctx context.Context, group string) ([]ConfigEntry, error)
	AlterGroupConfigs(ctx context.Context, req *request.AlterShareGroupConfigsRequest) error
	// DeleteGroup and the security calls are the request core's
	// (request/groups.go, request/security.go).
	DeleteGroup(ctx context.Context, group string) error
	// DeleteOffsets removes some of a group's committed offsets, with
	// each partition's refusal in the answer (OffsetDelete).
	DeleteOffsets(ctx context.Context, req *request.DeleteOffsetsRequest) ([]request.PartitionResult, error)
	// AlterPartitionReassignments and ListPartitionReassignments are the
	// request core's (request/reassign.go): each partition's refusal in
	// its result (AlterPartitionReassignmentsEach), the call's error for
	// what refuses them all.
	AlterPartitionReassignments(ctx context.Context, targets []request.ReassignmentTarget) ([]request.PartitionResult, error)
	ListPartitionReassignments(ctx context.Context, topics []request.PartitionsOf) ([]request.PendingReassignment, error)
	// ElectLeaders moves leadership to the preferred replicas now, with
	// each partition's refusal in the answer.
	ElectLeaders(ctx context.Context, topics []request.TopicPartitions) ([]request.PartitionResult, error)
	CreateAcls(ctx context.Context, acls []request.ACL) error
	ListAcls(ctx context.Context, filter request.ACL) ([]request.ACL, error)
	DeleteAcls(ctx context.Context, filters []request.ACL) ([]request.ACL, error)
	ListUsers(ctx context.Context) ([]request.UserDescription, error)
	// DeleteScramCredential removes one mechanism's credential of a
	// user ("SCRAM-SHA-256", "SCRAM-SHA-512"), the user with its last.
	DeleteScramCredential(ctx context.Context, user, mechanism string) error
	// UpsertScramCredential sets one mechanism's credential of a user
	// from a salted password the client derived (Kafka's
	// AlterUserScramCredentials sends that, never the password), with
	// its own salt and iterations; the user's other mechanism is kept.
	UpsertScramCredential(ctx context.Context, user, mechanism string, iterations int32, salt, saltedPassword []byte) error
	DescribeProducers(ctx context.Context, topic string, partitions []int32) ([]request.PartitionProducers, error)
	// LogDirs describes this broker's log directories and the partition
	// replicas in them.
	LogDirs(ctx context.Context) ([]request.LogDir, error)
}

// Kafka's config sources (DescribeConfigs v1 and later).
const (
	SourceDynamicTopic  int8 = 1
	SourceStaticBroker  int8 = 4
	SourceDefault       int8 = 5
	SourceGroup         int8 = 8
	sourceUnknown       int8 = -1
	configTypeBoolean   int8 = 1
	configTypeString    int8 = 2
	configTypeInt       int8 = 3
	configTypeLong      int8 = 5
	configTypeList      int8 = 7
	authorizedOpsAbsent      = -2147483648 // not asked for, or not served
)

// ConfigEntry is one config key as DescribeConfigs answers it.
type ConfigEntry struct {
	Name, Value string
	// Source is Kafka's: SourceDynamicTopic, SourceStaticBroker or
	// SourceDefault.
	Source   int8
	ReadOnly bool
	// Type is Kafka's config type (1 boolean, 2 string, 3 int, 5 long,
	// 7 list).
	Type int8
	Doc  string
	// Synonyms are where the value could come from, the one in effect
	// first (KIP-226).
	Synonyms []ConfigSynonym
}

// ConfigSynonym is one source of a key's value.
type ConfigSynonym struct {
	Name, Value string
	Source      int8
}

// adminTimeout is how long an admin call that waits for the metadata
// (a topic created, deleted, grown) may take when its request gives no
// timeout.
const adminTimeout = 30 * time.Second

// withTimeout bounds ctx by a request's timeout in milliseconds, or
// adminTimeout for none.
func withTimeout(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	d := adminTimeout
	if ms > 0 {
		d = time.Duration(ms) * time.Millisecond
	}
	return context.WithTimeout(ctx, d)
}

// adminDispatch answers the admin APIs; ok is false for another API.
func adminDispatch(ctx context.Context, b Backend, req kmsg.Request) (kmsg.Response, bool) {
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		return createTopics(ctx, b, req), true
	case *kmsg.DeleteTopicsRequest:
		return deleteTopics(ctx, b, req), true
	case *kmsg.CreatePartitionsRequest:
		return createPartitions(ctx, b, req), true
	case *kmsg.DescribeClusterRequest:
		return describeCluster(ctx, b, req), true
	case *kmsg.DescribeConfigsRequest:
		return describeConfigs(ctx, b, req), true
	case *kmsg.AlterConfigsRequest:
		return alterConfigs(ctx, b, req), true
	case *kmsg.IncrementalAlterConfigsRequest:
		return incrementalAlterConfigs(ctx, b, req), true
	case *kmsg.DeleteGroupsRequest:
		return deleteGroups(ctx, b, req), true
	case *kmsg.OffsetDeleteRequest:
		return offsetDelete(ctx, b, req), true
	case *kmsg.ConsumerGroupDescribeRequest:
		return consumerGroupDescribe(ctx, b, req), true
	case *kmsg.CreateACLsRequest:
		return createACLs(ctx, b, req), true
	case *kmsg.DescribeACLsRequest:
		return describeACLs(ctx, b, req), true
	case *kmsg.DeleteACLsRequest:
		return deleteACLs(ctx, b, req), true
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return describeSCRAM(ctx, b, req), true
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return alterSCRAM(ctx, b, req), true
	case *kmsg.DescribeProducersRequest:
		return describeProducers(ctx, b, req), true
	case *kmsg.DescribeLogDirsRequest:
		return describeLogDirs(ctx, b, req), true
	case *kmsg.ElectLeadersRequest:
		return electLeaders(ctx, b, req), true
	case *kmsg.AlterPartitionAssignmentsRequest:
		return alterPartitionAssignments(ctx, b, req), true
	case *kmsg.ListPartitionReassignmentsRequest:
		return listPartitionReassignments(ctx, b, req), true
	}
	return nil, false
}
