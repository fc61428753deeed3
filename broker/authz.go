package broker

// Authorization with authorizer.enable: every public call needs an ACL
// (auth.Authorizer: deny over allow, no match refused, super users pass)
// for what it does, checked from the request before the handler runs, and
// answers that list topics or groups show only those the principal may
// describe. The table below is the one place that says which operation on
// which resource each call needs.

import (
	"fmt"
	"slices"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// authorizer evaluates against this node's current image.
func (b *Broker) authorizer() *auth.Authorizer {
	return auth.NewAuthorizer(b.cluster.node.Image().ACLs(), b.guard.superUsers)
}

// need is one check a request makes.
type need struct {
	op   auth.Operation
	rt   auth.ResourceType
	name string
	// orCreateOnCluster: Create on the cluster is enough too (Kafka's
	// rule for creating topics).
	orCreateOnCluster bool
	// orWriteOnAnyTopic: Write on some topic is enough too (Kafka's rule
	// for an idempotent producer's InitProducerId, KIP-679).
	orWriteOnAnyTopic bool
}

func topicNeed(op auth.Operation, name string) need {
	return need{op: op, rt: auth.ResourceTopic, name: name}
}
func groupNeed(op auth.Operation, name string) need {
	return need{op: op, rt: auth.ResourceGroup, name: name}
}
func clusterNeed(op auth.Operation) need {
	return need{op: op, rt: auth.ResourceCluster, name: auth.ClusterName}
}

// coreAuthorized are the calls the request core authorizes itself, as
// it does the same operations from every door (request/authz.go): the
// interceptor leaves them to it rather than check them twice. Their rows
// below say what the core checks.
var coreAuthorized = map[string]bool{
	quirev1.Producer_Produce_FullMethodName:        true,
	quirev1.Producer_ProduceStream_FullMethodName:  true,
	quirev1.Consumer_Fetch_FullMethodName:          true,
	quirev1.Consumer_ListOffsets_FullMethodName:    true,
	quirev1.Admin_DeleteRecords_FullMethodName:     true,
	quirev1.Admin_DescribeTopics_FullMethodName:    true,
	quirev1.Producer_InitProducerId_FullMethodName: true,
	quirev1.Producer_ProduceRecords_FullMethodName: true,

	// Groups and security administration (request/groups.go,
	// request/group_reset.go, request/security.go).
	quirev1.Groups_ConsumerGroupHeartbeat_FullMethodName: true,
	quirev1.Groups_DescribeGroup_FullMethodName:          true,
	quirev1.Groups_ListGroups_FullMethodName:             true,
	quirev1.Groups_CommitOffsets_FullMethodName:          true,
	quirev1.Groups_FetchOffsets_FullMethodName:           true,
	quirev1.Groups_DeleteGroup_FullMethodName:            true,
	quirev1.Groups_ResetOffsets_FullMethodName:           true,
	quirev1.Groups_DeleteOffsets_FullMethodName:          true,
	quirev1.Groups_Subscribe_FullMethodName:              true, // subscribe/
	quirev1.Security_UpsertUser_FullMethodName:           true,
	quirev1.Security_DeleteUser_FullMethodName:           true,
	quirev1.Security_ListUsers_FullMethodName:            true,
	quirev1.Security_CreateAcls_FullMethodName:           true,
	quirev1.Security_DeleteAcls_FullMethodName:           true,
	quirev1.Security_ListAcls_FullMethodName:             true,
	// Topic and config administration (request/topics.go, configs.go).
	quirev1.Admin_CreateTopic_FullMethodName:       true,
	quirev1.Admin_DeleteTopic_FullMethodName:       true,
	quirev1.Admin_CreatePartitions_FullMethodName:  true,
	quirev1.Admin_DescribeConfigs_FullMethodName:   true,
	quirev1.Admin_AlterConfigs_FullMethodName:      true,
	quirev1.Admin_ListTopics_FullMethodName:        true,
	quirev1.Admin_DescribeCluster_FullMethodName:   true,
	quirev1.Admin_DescribeProducers_FullMethodName: true,
	quirev1.Admin_UnregisterBroker_FullMethodName:  true,
	quirev1.Admin_ElectLeaders_FullMethodName:      true,
	quirev1.Metadata_GetMetadata_FullMethodName:    true,
	// Transactions (request/transactions.go).
	quirev1.Transactions_InitTransactions_FullMethodName:     true,
	quirev1.Transactions_SendOffsets_FullMethodName:          true,
	quirev1.Transactions_EndTransaction_FullMethodName:       true,
	quirev1.Transactions_DescribeTransactions_FullMethodName: true,
	quirev1.Transactions_ListTransactions_FullMethodName:     true,
	quirev1.Transactions_AbortTransaction_FullMethodName:     true,
}

// checkRequest refuses req unless id may do everything it asks.
func (b *Broker) checkRequest(z *auth.Authorizer, id Identity, method string, req any) error {
	if coreAuthorized[method] {
		return nil
	}
	needs, known := b.requestNeeds(req)
	if !known && !openMethod(method) {
		// A call this table does not know (a service added later)
		// needs Alter on the cluster: nothing is left open by omission.
		needs = []need{clusterNeed(auth.OpAlter)}
	}
	for _, n := range needs {
		r := requestOf(id.Principal, n)
		if z.Authorize(r) {
			continue
		}
		if n.orCreateOnCluster && z.Authorize(auth.Request{Principal: id.Principal, Operation: auth.OpCreate, ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterName}) {
			continue
		}
		if n.orWriteOnAnyTopic {
			if z.AuthorizeAny(id.Principal, auth.OpWrite, auth.ResourceTopic) {
				continue
			}
			return fmt.Errorf("%w (nor Write on any topic)", refusal(r))
		}
		return refusal(r)
	}
	return nil
}

func requestOf(principal string, n need) auth.Request {
	return auth.Request{Principal: principal, Operation: n.op, ResourceType: n.rt, ResourceName: n.name}
}

// refusal is the error for a refused request, by resource type.
func refusal(r auth.Request) error { return request.Refusal(r) }

// topicsToCreate adds, for each named topic the image lacks, the Create a
// request that may auto-create it needs.
func (b *Broker) withCreates(needs []need, topics []string, autoCreate bool) []need {
	if !autoCreate || !b.cfg.AutoCreateTopicsEnable {
		return needs
	}
	img := b.cluster.node.Image()
	for _, t := range topics {
		if _, ok := img.Topic(t); !ok {
			needs = append(needs, need{op: auth.OpCreate, rt: auth.ResourceTopic, name: t, orCreateOnCluster: true})
		}
	}
	return needs
}

// requestNeeds is what each public call needs, by its request; known is
// false for a request type this table does not list.
func (b *Broker) requestNeeds(req any) (needs []need, known bool) {
	switch m := req.(type) {
	// Admin.
	case *quirev1.CreateTopicRequest:
		return []need{{op: auth.OpCreate, rt: auth.ResourceTopic, name: m.Name, orCreateOnCluster: true}}, true
	case *quirev1.DeleteTopicRequest:
		return []need{topicNeed(auth.OpDelete, m.Name)}, true
	case *quirev1.ListTopicsRequest:
		return nil, true // filtered
	case *quirev1.DescribeTopicsRequest:
		var out []need
		for _, t := range m.Names {
			out = append(out, topicNeed(auth.OpDescribe, t))
		}
		return out, true // all topics when none named: filtered
	case *quirev1.DescribeClusterRequest, *quirev1.DescribeFeaturesRequest:
		return []need{clusterNeed(auth.OpDescribe)}, true
	case *quirev1.DescribeConfigsRequest:
		if m.Group != "" {
			return []need{groupNeed(auth.OpDescribeConfigs, m.Group)}, true
		}
		return []need{topicNeed(auth.OpDescribeConfigs, m.Topic)}, true
	case *quirev1.AlterConfigsRequest:
		if m.Group != "" {
			return []need{groupNeed(auth.OpAlterConfigs, m.Group)}, true
		}
		return []need{topicNeed(auth.OpAlterConfigs, m.Topic)}, true
	case *quirev1.CreatePartitionsRequest:
		return []need{topicNeed(auth.OpAlter, m.Topic)}, true
	case *quirev1.DescribeProducersRequest:
		// As Kafka's DescribeProducers: reading the topic.
		return []need{topicNeed(auth.OpRead, m.Topic)}, true
	case *quirev1.DeleteRecordsRequest:
		// As Kafka's DeleteRecords: deleting from each topic named.
		var out []need
		for _, p := range m.Partitions {
			out = appendNeed(out, topicNeed(auth.OpDelete, p.Topic))
		}
		return out, true
	case *quirev1.UnregisterBrokerRequest, *quirev1.UpdateFeaturesRequest, *quirev1.ElectLeadersRequest,
		*quirev1.AlterPartitionReassignmentsRequest, *quirev1.CordonBrokerRequest, *quirev1.SetReassignmentThrottleRequest:
		return []need{clusterNeed(auth.OpAlter)}, true
	case *quirev1.ListPartitionReassignmentsRequest:
		return []need{clusterNeed(auth.OpDescribe)}, true
	// Producer.
	case *quirev1.ProduceRequest:
		return b.produceNeeds(m), true
	case *quirev1.ProduceRecordsRequest:
		return b.withCreates([]need{topicNeed(auth.OpWrite, m.Topic)}, []string{m.Topic}, true), true
	case *quirev1.InitProducerIdRequest:
		// As Kafka's for an idempotent producer: it writes the metadata
		// log (a block of ids) and bumps a producer's epoch, so only a
		// principal that may write somewhere may ask.
		return []need{{op: auth.OpIdempotentWrite, rt: auth.ResourceCluster, name: auth.ClusterName, orWriteOnAnyTopic: true}}, true
	// Consumer.
	case *quirev1.FetchRequest:
		var out []need
		for _, p := range m.Partitions {
			out = appendNeed(out, topicNeed(auth.OpRead, p.Topic))
		}
		return out, true
	case *quirev1.FetchRecordsRequest:
		return []need{topicNeed(auth.OpRead, m.Topic)}, true
	case *quirev1.FetchRecordsMultiRequest:
		var out []need
		for _, p := range m.Partitions {
			out = appendNeed(out, topicNeed(auth.OpRead, p.Topic))
		}
		return out, true
	case *quirev1.ListOffsetsRequest:
		var out []need
		for _, p := range m.Partitions {
			out = appendNeed(out, topicNeed(auth.OpDescribe, p.Topic))
		}
		return out, true
	// Groups.
	case *quirev1.CommitOffsetsRequest:
		out := []need{groupNeed(auth.OpRead, m.Group)}
		for _, o := range m.Offsets {
			out = appendNeed(out, topicNeed(auth.OpRead, o.Topic))
		}
		return out, true
	case *quirev1.FetchOffsetsRequest:
		out := []need{groupNeed(auth.OpDescribe, m.Group)}
		for _, p := range m.Partitions {
			out = appendNeed(out, topicNeed(auth.OpDescribe, p.Topic))
		}
		return out, true
	case *quirev1.ListGroupsRequest:
		return nil, true // filtered
	// Transactions: what the core checks (request/transactions.go).
	case *quirev1.InitTransactionsRequest:
		return []need{{op: auth.OpWrite, rt: auth.ResourceTransactionalID, name: m.TransactionalId}}, true
	case *quirev1.SendOffsetsRequest:
		out := []need{{op: auth.OpWrite, rt: auth.ResourceTransactionalID, name: m.GetProducer().GetTransactionalId()}, groupNeed(auth.OpRead, m.Group)}
		for _, o := range m.Offsets {
			out = appendNeed(out, topicNeed(auth.OpRead, o.Topic))
		}
		return out, true
	case *quirev1.EndTransactionRequest:
		return []need{{op: auth.OpWrite, rt: auth.ResourceTransactionalID, name: m.GetProducer().GetTransactionalId()}}, true
	case *quirev1.AbortTransactionRequest:
		return []need{{op: auth.OpWrite, rt: auth.ResourceTransactionalID, name: m.TransactionalId}}, true
	case *quirev1.DescribeTransactionsRequest:
		var out []need
		for _, id := range m.TransactionalIds {
			out = append(out, need{op: auth.OpDescribe, rt: auth.ResourceTransactionalID, name: id})
		}
		return out, true
	case *quirev1.ListTransactionsRequest:
		return nil, true // filtered
	case *quirev1.DeleteGroupRequest:
		return []need{groupNeed(auth.OpDelete, m.Group)}, true
	case *quirev1.DeleteOffsetsRequest:
		// As Kafka's OffsetDelete: deleting the group's offsets, reading
		// the topics.
		out := []need{groupNeed(auth.OpDelete, m.Group)}
		for _, t := range m.Topics {
			out = appendNeed(out, topicNeed(auth.OpRead, t.Topic))
		}
		return out, true
	case *quirev1.ConsumerGroupHeartbeatRequest:
		out := []need{groupNeed(auth.OpRead, m.Group)}
		for _, t := range m.GetSubscription().GetTopics() {
			out = appendNeed(out, topicNeed(auth.OpDescribe, t))
		}
		return out, true
	case *quirev1.DescribeGroupRequest:
		return []need{groupNeed(auth.OpDescribe, m.Group)}, true
	case *quirev1.DescribeShareGroupRequest:
		return []need{groupNeed(auth.OpDescribe, m.Group)}, true
	case *quirev1.DescribeShareGroupOffsetsRequest:
		// As Kafka's: Describe on the group and the topics named (with
		// none, the core leaves out the topics the caller may not
		// describe).
		out := []need{groupNeed(auth.OpDescribe, m.Group)}
		for _, t := range m.Topics {
			out = appendNeed(out, topicNeed(auth.OpDescribe, t.Topic))
		}
		return out, true
	case *quirev1.AlterShareGroupOffsetsRequest:
		// As Kafka's: Read on the group and the topics.
		out := []need{groupNeed(auth.OpRead, m.Group)}
		for _, o := range m.Offsets {
			out = appendNeed(out, topicNeed(auth.OpRead, o.Topic))
		}
		return out, true
	case *quirev1.ResetOffsetsRequest:
		// As Kafka's offset reset: committing for the group, reading the
		// topics (the committed ones when none is named are checked as
		// they are reset).
		out := []need{groupNeed(auth.OpRead, m.Group)}
		for _, t := range m.Topics {
			out = appendNeed(out, topicNeed(auth.OpRead, t))
		}
		return out, true
	case *quirev1.SubscribeRequest:
		// The start joins the group and reads the topics named; topics a
		// regular expression matches are checked as they are assigned,
		// and every read, commit and heartbeat as the core serves it.
		// Acknowledgements need nothing more.
		st := m.GetStart()
		if st == nil {
			return nil, true
		}
		out := []need{groupNeed(auth.OpRead, st.Group)}
		for _, t := range st.GetSubscription().GetTopics() {
			out = appendNeed(out, topicNeed(auth.OpRead, t))
		}
		return out, true
	// Metadata.
	case *quirev1.GetMetadataRequest:
		var out []need
		for _, t := range m.Topics {
			out = appendNeed(out, topicNeed(auth.OpDescribe, t))
		}
		return b.withCreates(out, m.Topics, m.AllowAutoTopicCreation), true
	// Security.
	case *quirev1.UpsertUserRequest, *quirev1.DeleteUserRequest, *quirev1.CreateAclsRequest, *quirev1.DeleteAclsRequest:
		return []need{clusterNeed(auth.OpAlter)}, true
	case *quirev1.ListUsersRequest, *quirev1.ListAclsRequest:
		return []need{clusterNeed(auth.OpDescribe)}, true
	case *quirev1.WhoAmIRequest:
		return nil, true
	}
	if m, ok := service.ProduceRequestOf(req); ok { // ProduceStream's messages
		return b.produceNeeds(m), true
	}
	return nil, false
}

// openMethod: the services every caller may use (health, reflection).
func openMethod(method string) bool {
	for _, p := range []string{"/grpc.health.v1.Health/", "/grpc.reflection."} {
		if len(method) >= len(p) && method[:len(p)] == p {
			return true
		}
	}
	return false
}

func (b *Broker) produceNeeds(m *quirev1.ProduceRequest) []need {
	var out []need
	var topics []string
	for _, p := range m.Partitions {
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
			out = append(out, topicNeed(auth.OpWrite, p.Topic))
		}
	}
	return b.withCreates(out, topics, true)
}

func appendNeed(out []need, n need) []need {
	if slices.Contains(out, n) {
		return out
	}
	return append(out, n)
}

// filterResponse removes from a listing what id may not describe.
func filterResponse(z *auth.Authorizer, id Identity, resp any) {
	may := func(rt auth.ResourceType, name string) bool {
		return z.Authorize(auth.Request{Principal: id.Principal, Operation: auth.OpDescribe, ResourceType: rt, ResourceName: name})
	}
	switch m := resp.(type) {
	case *quirev1.ListTopicsResponse:
		m.Topics = slices.DeleteFunc(m.Topics, func(t *quirev1.TopicListing) bool { return !may(auth.ResourceTopic, t.Name) })
	case *quirev1.DescribeTopicsResponse:
		m.Topics = slices.DeleteFunc(m.Topics, func(t *quirev1.TopicDescription) bool { return !may(auth.ResourceTopic, t.Name) })
	case *quirev1.GetMetadataResponse:
		m.Topics = slices.DeleteFunc(m.Topics, func(t *quirev1.TopicMetadata) bool { return !may(auth.ResourceTopic, t.Name) })
	case *quirev1.ListGroupsResponse:
		m.Groups = slices.DeleteFunc(m.Groups, func(g *quirev1.GroupListing) bool { return !may(auth.ResourceGroup, g.Group) })
	case *quirev1.FetchOffsetsResponse:
		m.Offsets = slices.DeleteFunc(m.Offsets, func(o *quirev1.CommittedOffset) bool { return !may(auth.ResourceTopic, o.Topic) })
	}
}
