package metadata

import (
	"maps"
	"slices"
	"sort"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/txn"
)

// BrokerInfo is one registered broker. Epoch is the broker epoch: the raft
// index of its latest registration. DirectoryID is the id of its log
// directory (storage.Manager.DirectoryID), "" when unknown; a registration
// with another one means the broker's data is gone. Addr is the address
// other nodes dial (its inter-broker listener); Endpoints holds every
// listener's advertised address, nil for a broker that registered only Addr.
type BrokerInfo struct {
	ID          int32
	Incarnation string
	Addr        string
	Rack        string
	Fenced      bool
	Epoch       int64
	DirectoryID string
	// MetadataVersions is the range of metadata.version levels the
	// broker's code supports (the zero value: 1 to 1).
	MetadataVersions VersionRange
	Endpoints        []Endpoint
	// MaxPartitions is how many partition replicas (leaders and
	// followers) the broker can host, as its heartbeats last reported it
	// (max.partitions.per.broker); 0: unknown, no limit.
	MaxPartitions int32
	// Cordoned: no new replica is placed on the broker (CordonBroker).
	Cordoned bool
	// ReassignmentThrottle is its replica.reassignment.throttle.bytes.per.second
	// as set dynamically (BrokerThrottle), -1 when not set: the broker's
	// configuration then says.
	ReassignmentThrottle int64
}

// Endpoint is one named listener of a broker and the address it advertises.
type Endpoint struct {
	Listener string
	Addr     string
}

// AddrFor is where a client that reached the cluster on the named listener
// dials this broker: that listener's advertised address, or Addr when the
// broker registered no such listener.
func (b BrokerInfo) AddrFor(listener string) string {
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e.Addr
		}
	}
	return b.Addr
}

// PartitionInfo is one partition's assignment and leadership.
type PartitionInfo struct {
	Topic          string
	Partition      int32
	Replicas, ISR  []int32
	Leader         int32 // -1: none
	LeaderEpoch    int32
	PartitionEpoch int32
	// AddingReplicas and RemovingReplicas are a pending reassignment
	// (reassign.go): Replicas holds both; nil when none is pending.
	AddingReplicas, RemovingReplicas []int32
}

// TopicInfo is one topic. Configs holds only explicitly set keys.
type TopicInfo struct {
	Name       string
	ID         string
	Partitions []PartitionInfo
	Configs    map[string]string
	// RequestID is the client's idempotency key of the create that made
	// the topic (CreateTopic.request_id, metadata.version 18), "" none.
	RequestID string
}

// CreatedBy reports whether the topic was created with request id id: a
// create of its name with that id is a retry of the one that made it.
// It never holds for an empty id.
func (t TopicInfo) CreatedBy(id string) bool { return id != "" && t.RequestID == id }

// Image is an immutable view of the cluster metadata at one applied raft
// index. It is cheap to get and safe to share: accessors return copies.
type Image struct {
	index        uint64
	clusterID    string
	controllerID int32
	// finalizedVersion is the finalized metadata.version, 0 until a
	// FeatureLevel raised it (MetadataVersionBaseline).
	finalizedVersion int32
	nextProducerID   int64
	brokers          map[int32]BrokerInfo
	topics           map[string]*TopicInfo // never mutated once published
	// groups: group -> topic -> partition -> committed offset; no map in
	// it is mutated once published (see groups.go).
	groups map[string]map[string]map[int32]CommittedOffset
	// groupStates: consumer group membership (groupstate.go); nil or
	// a map never mutated once published.
	groupStates map[string]*groupState
	// users and acls: SCRAM credentials and ACLs (security.go); never
	// mutated once published.
	users map[string]auth.Credential
	acls  []auth.ACL
	// transactions: the transaction coordinator's state of each
	// transactional id (transactions.go); never mutated once published.
	transactions map[string]txn.Txn
	// shareStates: share-partitions' state (sharestate.go); never
	// mutated once published.
	shareStates map[ShareKey]ShareState
	// shareGroupConfigs: share groups' settings (sharegroupconfig.go);
	// never mutated once published.
	shareGroupConfigs map[string]ShareGroupConfig
}

func emptyImage() *Image {
	return &Image{controllerID: -1, brokers: map[int32]BrokerInfo{}, topics: map[string]*TopicInfo{},
		groups: map[string]map[string]map[int32]CommittedOffset{}}
}

// Index is the raft index of the last command applied to this image.
func (img *Image) Index() uint64 { return img.index }

// ClusterID is the id the cluster was formed with ("" until the first
// controller wrote it).
func (img *Image) ClusterID() string { return img.clusterID }

// ControllerID is the node that last became controller, -1 if none yet.
func (img *Image) ControllerID() int32 { return img.controllerID }

// MetadataVersion is the finalized metadata.version: the highest command
// level the controller may propose.
func (img *Image) MetadataVersion() int32 { return img.metadataVersion() }

func (img *Image) metadataVersion() int32 {
	if img.finalizedVersion == 0 {
		return MetadataVersionBaseline
	}
	return img.finalizedVersion
}

// NextProducerID is the first producer id no broker has been given yet.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// Brokers returns every registered broker, sorted by id.
func (img *Image) Brokers() []BrokerInfo {
	out := make([]BrokerInfo, 0, len(img.brokers))
	for _, b := range img.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Broker returns one broker.
func (img *Image) Broker(id int32) (BrokerInfo, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// Topics returns every topic, sorted by name.
func (img *Image) Topics() []TopicInfo {
	names := make([]string, 0, len(img.topics))
	for n := range img.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]TopicInfo, len(names))
	for i, n := range names {
		out[i] = img.topics[n].clone()
	}
	return out
}

// Topic returns one topic.
func (img *Image) Topic(name string) (TopicInfo, bool) {
	t, ok := img.topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return t.clone(), true
}

// Partition returns one partition.
func (img *Image) Partition(topic string, p int32) (PartitionInfo, bool) {
	t, ok := img.topics[topic]
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return PartitionInfo{}, false
	}
	return t.Partitions[p].clone(), true
}

// PartitionCount is the number of partitions over all topics.
func (img *Image) PartitionCount() int {
	n := 0
	for _, t := range img.topics {
		n += len(t.Partitions)
	}
	return n
}

// liveBrokers returns the registered, unfenced brokers sorted by id.
func (img *Image) liveBrokers() []BrokerInfo {
	var out []BrokerInfo
	for _, b := range img.Brokers() {
		if !b.Fenced {
			out = append(out, b)
		}
	}
	return out
}

// placeableBrokers returns the live brokers that are not cordoned: those
// new replicas may be placed on.
func (img *Image) placeableBrokers() []BrokerInfo {
	var out []BrokerInfo
	for _, b := range img.liveBrokers() {
		if !b.Cordoned {
			out = append(out, b)
		}
	}
	return out
}

func (img *Image) isLive(id int32) bool {
	b, ok := img.brokers[id]
	return ok && !b.Fenced
}

func (p PartitionInfo) clone() PartitionInfo {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
	return p
}

func (t *TopicInfo) clone() TopicInfo {
	out := *t
	out.Partitions = make([]PartitionInfo, len(t.Partitions))
	for i, p := range t.Partitions {
		out.Partitions[i] = p.clone()
	}
	out.Configs = maps.Clone(t.Configs)
	if out.Configs == nil {
		out.Configs = map[string]string{}
	}
	return out
}
