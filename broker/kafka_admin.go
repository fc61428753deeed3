package broker

import (
	"context"
	"strconv"

	"github.com/quirelog/quire/config"
	"github.com/quirelog/quire/kafka"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/sharegroup"
)

// kafka.AdminBackend over the request core, which authorizes every call:
// Kafka's admin API on the Kafka listeners answers what the gRPC calls
// answer, and each call is authorized as its gRPC call is.

// CreateTopic, DeleteTopic, CreatePartitions, AlterConfigs and the
// topic side of TopicConfigs are the request core's, which authorizes
// them as it does the gRPC calls.

func (k kafkaBackend) CreateTopic(ctx context.Context, req *request.CreateTopicRequest) (*request.CreateTopicResult, error) {
	return k.b.core.CreateTopic(service.CoreContext(ctx), req)
}

func (k kafkaBackend) DeleteTopic(ctx context.Context, name, id string) error {
	_, err := k.b.core.DeleteTopicIncarnation(service.CoreContext(ctx), name, id)
	return err
}

func (k kafkaBackend) CreatePartitions(ctx context.Context, req *request.CreatePartitionsRequest) (*request.CreatePartitionsResult, error) {
	return k.b.core.CreatePartitions(service.CoreContext(ctx), req)
}

func (k kafkaBackend) AlterConfigs(ctx context.Context, req *request.AlterConfigsRequest) error {
	return k.b.core.AlterConfigs(service.CoreContext(ctx), req)
}

// DescribeCluster gives each broker's address on the client's listener,
// leaving out those without one (their inter-broker address speaks
// gRPC), as Metadata does.
func (k kafkaBackend) DescribeCluster(ctx context.Context) (*request.ClusterDescription, error) {
	d, err := k.b.core.DescribeCluster(service.CoreContext(ctx))
	if err != nil {
		return nil, err
	}
	listener := k.b.clientListener(ctx)
	kept := d.Brokers[:0]
	for _, br := range d.Brokers {
		for _, e := range br.Info.Endpoints {
			if e.Listener == listener {
				br.Info.Addr = e.Addr
				kept = append(kept, br)
				break
			}
		}
	}
	d.Brokers = kept
	return d, nil
}

// GroupConfigs is the core's DescribeShareGroupConfigs, each key typed.
func (k kafkaBackend) GroupConfigs(ctx context.Context, group string) ([]kafka.ConfigEntry, error) {
	entries, err := k.b.core.DescribeShareGroupConfigs(service.CoreContext(ctx), group)
	if err != nil {
		return nil, err
	}
	return kafkaConfigs(entries, func(e request.ConfigEntry) int8 {
		switch e.Name {
		case sharegroup.KeyKeyOrdering:
			return 1 // boolean
		case sharegroup.KeyRecordLockDuration, sharegroup.KeyDeliveryCountLimit:
			return 3 // int
		}
		return 2 // string
	}), nil
}

func (k kafkaBackend) AlterGroupConfigs(ctx context.Context, req *request.AlterShareGroupConfigsRequest) error {
	return k.b.core.AlterShareGroupConfigs(service.CoreContext(ctx), req)
}

// configSources are Kafka's config sources of the core's.
var configSources = map[request.ConfigSource]int8{
	request.SourceGroup:   kafka.SourceGroup,
	request.SourceTopic:   kafka.SourceDynamicTopic,
	request.SourceBroker:  kafka.SourceStaticBroker,
	request.SourceDefault: kafka.SourceDefault,
}

// topicConfigTypes are Kafka's types of the topic keys that are not
// longs.
var topicConfigTypes = map[string]int8{
	"cleanup.policy":              7, // list
	"preallocate":                 1, // boolean
	request.DeadLetterGroupEnable: 1,
	"max.message.bytes":           3, // int
	"min.insync.replicas":         3,

	"min.cleanable.dirty.ratio": 6, // double
}

// kafkaConfigs is the core's config entries as Kafka's, typed by typ.
func kafkaConfigs(entries []request.ConfigEntry, typ func(request.ConfigEntry) int8) []kafka.ConfigEntry {
	out := make([]kafka.ConfigEntry, len(entries))
	for i, c := range entries {
		e := kafka.ConfigEntry{Name: c.Name, Value: c.Value, Source: configSources[c.Source], ReadOnly: c.ReadOnly, Doc: c.Documentation, Type: typ(c)}
		for _, s := range c.Synonyms {
			e.Synonyms = append(e.Synonyms, kafka.ConfigSynonym{Name: s.Name, Value: s.Value, Source: configSources[s.Source]})
		}
		out[i] = e
	}
	return out
}

// TopicConfigs is the core's DescribeConfigs, each key with its type.
func (k kafkaBackend) TopicConfigs(ctx context.Context, topic string) ([]kafka.ConfigEntry, error) {
	entries, err := k.b.core.DescribeConfigs(service.CoreContext(ctx), topic)
	if err != nil {
		return nil, err
	}
	return kafkaConfigs(entries, func(e request.ConfigEntry) int8 {
		if t, ok := topicConfigTypes[e.Name]; ok {
			return t
		}
		return configTypeLong
	}), nil
}

// BrokerConfigs is the core's DescribeBrokerConfigs, each key typed by
// its default's form.
func (k kafkaBackend) BrokerConfigs(ctx context.Context, broker string) ([]kafka.ConfigEntry, error) {
	entries, err := k.b.core.DescribeBrokerConfigs(service.CoreContext(ctx), broker)
	if err != nil {
		return nil, err
	}
	return kafkaConfigs(entries, func(e request.ConfigEntry) int8 {
		if def, ok := config.KeyDefault(e.Name); ok {
			return configType(def)
		}
		return configType(e.Value)
	}), nil
}

// configTypeLong is Kafka's type of the topic keys not in
// topicConfigTypes.
const configTypeLong = 5

// configType is Kafka's type of a node key, by its default's form.
func configType(def string) int8 {
	if _, err := strconv.ParseBool(def); err == nil {
		return 1 // boolean
	}
	if _, err := strconv.ParseInt(def, 10, 64); err == nil {
		return 5 // long
	}
	return 2 // string
}

// DeleteGroup and the security calls go straight to the request core,
// as the gRPC services' do (request/groups.go, request/security.go).

func (k kafkaBackend) DeleteGroup(ctx context.Context, group string) error {
	return k.b.core.DeleteGroup(service.CoreContext(ctx), group)
}

func (k kafkaBackend) CreateAcls(ctx context.Context, acls []request.ACL) error {
	return k.b.core.CreateACLs(service.CoreContext(ctx), acls)
}

func (k kafkaBackend) ListAcls(ctx context.Context, filter request.ACL) ([]request.ACL, error) {
	return k.b.core.ListACLs(service.CoreContext(ctx), filter)
}

func (k kafkaBackend) DeleteAcls(ctx context.Context, filters []request.ACL) ([]request.ACL, error) {
	return k.b.core.DeleteACLs(service.CoreContext(ctx), filters)
}

func (k kafkaBackend) ListUsers(ctx context.Context) ([]request.UserDescription, error) {
	return k.b.core.ListUsers(service.CoreContext(ctx))
}

func (k kafkaBackend) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	return k.b.core.DeleteScramCredential(service.CoreContext(ctx), user, mechanism)
}

func (k kafkaBackend) UpsertScramCredential(ctx context.Context, user, mechanism string, iterations int32, salt, salted []byte) error {
	return k.b.core.UpsertScramCredential(service.CoreContext(ctx), user, mechanism, iterations, salt, salted)
}

func (k kafkaBackend) DescribeProducers(ctx context.Context, topic string, partitions []int32) ([]request.PartitionProducers, error) {
	return k.b.core.DescribeProducers(service.CoreContext(ctx), topic, partitions)
}

// LogDirs is the request core's DescribeLogDirs (request/log_dirs.go).
func (k kafkaBackend) LogDirs(ctx context.Context) ([]request.LogDir, error) {
	return k.b.core.DescribeLogDirs(service.CoreContext(ctx))
}

// DeleteOffsets is the request core's, each topic the caller may not
// read refused on its own (TOPIC_AUTHORIZATION_FAILED), as Kafka's
// OffsetDelete does.
func (k kafkaBackend) DeleteOffsets(ctx context.Context, req *request.DeleteOffsetsRequest) ([]request.PartitionResult, error) {
	return k.b.core.DeleteOffsets(service.CoreContext(ctx), req)
}

// ElectLeaders is the request core's (request/elect.go).
func (k kafkaBackend) ElectLeaders(ctx context.Context, topics []request.TopicPartitions) ([]request.PartitionResult, error) {
	return k.b.core.ElectLeaders(service.CoreContext(ctx), topics)
}
