package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	internalv1 "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// dialAs connects to node id with opts (a client certificate), closed in
// Cleanup.
func dialAs(t *testing.T, c *testcluster.Cluster, id int32, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(c.Addr(id), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// refused checks err is a status with grpc code gc and quire code qc whose
// message holds every one of parts.
func refused(t *testing.T, what string, err error, gc codes.Code, qc quirev1.ErrorCode, parts ...string) {
	t.Helper()
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != gc {
		t.Fatalf("%s: got %v, want %v", what, err, gc)
	}
	var got quirev1.ErrorCode
	for _, d := range st.Details() {
		if e, ok := d.(*quirev1.Error); ok {
			got = e.Code
		}
	}
	if got != qc {
		t.Fatalf("%s: code %v, want %v (%v)", what, got, qc, err)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Fatalf("%s: message %q does not name %q", what, st.Message(), p)
		}
	}
}

func TestClusterSecurityInternalServicesAnswerOnlyNodes(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 3, testcluster.TLS(sec))
	createReplicatedTopic(t, c, "t")
	ctx := testCtx(t)
	// A client certificate from the cluster's CA, with no authorizer on:
	// it may produce...
	cc := dialAs(t, c, 1, sec.ClientCredentials("client-a"))
	c.Eventually(ctx, "produce as client-a", func() error {
		leader, _ := c.WaitLeader(ctx, "t", 0)
		_, err := quirev1.NewProducerClient(dialAs(t, c, leader, sec.ClientCredentials("client-a"))).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{
			Topic: "t", Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "x"}}}})
		return err
	})
	// ...but not pose as a follower, a raft peer or a broker.
	const who = "User:CN=client-a,O=quire"
	_, err := internalv1.NewReplicaServiceClient(cc).ReplicaFetch(ctx, &internalv1.ReplicaFetchRequest{ReplicaId: 2})
	refused(t, "ReplicaFetch", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who, "ReplicaFetch")
	_, err = internalv1.NewReplicaServiceClient(cc).DescribeLogs(ctx, &internalv1.DescribeLogsRequest{})
	refused(t, "DescribeLogs", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who)
	_, err = internalv1.NewRaftTransportClient(cc).RequestVote(ctx, &internalv1.RequestVoteRequest{Term: 1 << 40})
	refused(t, "RequestVote", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who, "RaftTransport")
	_, err = internalv1.NewRaftTransportClient(cc).AppendEntries(ctx, &internalv1.AppendEntriesRequest{Term: 1 << 40})
	refused(t, "AppendEntries", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who)
	stream, err := internalv1.NewRaftTransportClient(cc).AppendEntriesPipeline(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	refused(t, "AppendEntriesPipeline", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who)
	_, err = internalv1.NewControllerServiceClient(cc).RegisterBroker(ctx, &internalv1.RegisterBrokerRequest{})
	refused(t, "RegisterBroker", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who, "ControllerService")
	// The term sent above never reached raft: the quorum still has a
	// leader and the nodes still serve.
	c.WaitController(ctx)
	// A node's own certificate passes.
	if _, err := internalv1.NewReplicaServiceClient(c.Conn(1)).DescribeLogs(ctx, &internalv1.DescribeLogsRequest{}); err != nil {
		t.Fatalf("node 1's certificate refused: %v", err)
	}
}

// withUser adds SCRAM credentials to ctx.
func withUser(ctx context.Context, user, password string) context.Context {
	return grpcmd.AppendToOutgoingContext(ctx, "quire-user", user, "quire-password", password)
}

func acl(principal, perm, op, rt, name, pattern string) *quirev1.Acl {
	return &quirev1.Acl{Principal: principal, Permission: perm, Operation: op, ResourceType: rt, ResourceName: name, PatternType: pattern}
}

func TestClusterSecurityACLsAndUsers(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec), testcluster.Authorizer())
	ctx := testCtx(t)
	admin := quirev1.NewSecurityClient(c.Conn(1)) // node 1: a super user
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionSecurity)
	createTopic(t, c, 1, "orders", 1, 1)
	createTopic(t, c, 1, "hidden", 1, 1)
	c.WaitLeader(ctx, "orders", 0)
	if _, err := admin.UpsertUser(ctx, &quirev1.UpsertUserRequest{Name: "alice", Password: "alice-pw"}); err != nil {
		t.Fatal(err)
	}
	const reader = "User:CN=reader,O=quire"
	if _, err := admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{
		acl(reader, "Allow", "Read", "Topic", "orders", "Literal"),
		acl(reader, "Allow", "Read", "Group", "app-", "Prefixed"),
		acl("User:alice", "Allow", "Write", "Topic", "*", "Literal"),
		acl("User:alice", "Allow", "Describe", "Topic", "*", "Literal"),
	}}); err != nil {
		t.Fatal(err)
	}
	who, err := admin.WhoAmI(ctx, &quirev1.WhoAmIRequest{})
	if err != nil || who.Principal != testcluster.NodePrincipal(1) || who.AuthenticatedBy != "certificate" {
		t.Fatalf("WhoAmI as node 1: %v %v", who, err)
	}

	// alice, by password over TLS (with a client certificate of her own
	// that grants nothing: the password's principal wins).
	aliceConn := dialAs(t, c, 1, sec.ClientCredentials("alice-host"))
	prodAlice := quirev1.NewProducerClient(aliceConn)
	produceAs := func(ctx context.Context, p quirev1.ProducerClient, topic string) error {
		resp, err := p.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic, TimeoutMs: 3000,
			Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "v"}}}})
		if err == nil && resp.Results[0].Error != nil {
			t.Fatalf("produce: %v", resp.Results[0].Error)
		}
		return err
	}
	if err := produceAs(withUser(ctx, "alice", "alice-pw"), prodAlice, "orders"); err != nil {
		t.Fatalf("alice may write: %v", err)
	}
	w, err := quirev1.NewSecurityClient(aliceConn).WhoAmI(withUser(ctx, "alice", "alice-pw"), &quirev1.WhoAmIRequest{})
	if err != nil || w.Principal != "User:alice" || w.AuthenticatedBy != "scram" {
		t.Fatalf("WhoAmI as alice: %v %v", w, err)
	}
	err = produceAs(withUser(ctx, "alice", "wrong"), prodAlice, "orders")
	refused(t, "wrong password", err, codes.Unauthenticated, quirev1.ErrorCode_SASL_AUTHENTICATION_FAILED, "alice")
	err = produceAs(withUser(ctx, "mallory", "alice-pw"), prodAlice, "orders")
	refused(t, "unknown user", err, codes.Unauthenticated, quirev1.ErrorCode_SASL_AUTHENTICATION_FAILED, "mallory")
	// alice without her password is her certificate, which has no ACL.
	err = produceAs(ctx, prodAlice, "orders")
	refused(t, "certificate without ACLs", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED,
		"User:CN=alice-host,O=quire", "Write", `topic "orders"`)
	// alice may not administer.
	_, err = quirev1.NewAdminClient(aliceConn).DeleteTopic(withUser(ctx, "alice", "alice-pw"), &quirev1.DeleteTopicRequest{Name: "orders"})
	refused(t, "alice deletes", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, "User:alice", "Delete", "orders")
	_, err = quirev1.NewSecurityClient(aliceConn).CreateAcls(withUser(ctx, "alice", "alice-pw"), &quirev1.CreateAclsRequest{
		Acls: []*quirev1.Acl{acl("User:alice", "Allow", "All", "Cluster", "", "")}})
	refused(t, "alice grants herself", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, "User:alice", "Alter", "cluster")

	// The reader: consumes, does not produce or delete, sees only orders.
	rc := dialAs(t, c, 1, sec.ClientCredentials("reader"))
	if _, err := quirev1.NewConsumerClient(rc).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "orders", MaxRecords: 10}); err != nil {
		t.Fatalf("reader fetch: %v", err)
	}
	_, err = quirev1.NewConsumerClient(rc).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "hidden", MaxRecords: 10})
	refused(t, "reader fetches hidden", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, reader, "Read", "hidden")
	err = produceAs(ctx, quirev1.NewProducerClient(rc), "orders")
	refused(t, "reader produces", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, reader, "Write", "orders")
	_, err = quirev1.NewAdminClient(rc).DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "orders"})
	refused(t, "reader deletes", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, reader, "Delete")
	_, err = quirev1.NewAdminClient(rc).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "new"})
	refused(t, "reader creates", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, reader, "Create", "new")
	lt, err := quirev1.NewAdminClient(rc).ListTopics(ctx, &quirev1.ListTopicsRequest{})
	if err != nil || len(lt.Topics) != 1 || lt.Topics[0].Name != "orders" {
		t.Fatalf("reader lists %v, %v; want orders alone", lt, err)
	}
	md, err := quirev1.NewMetadataClient(rc).GetMetadata(ctx, &quirev1.GetMetadataRequest{})
	if err != nil || len(md.Topics) != 1 || md.Topics[0].Name != "orders" {
		t.Fatalf("reader's metadata %v, %v; want orders alone", md.GetTopics(), err)
	}
	_, err = quirev1.NewMetadataClient(rc).GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"hidden"}})
	refused(t, "reader asks for hidden", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, "hidden")
	// A topic that does not exist reads the same as one hidden.
	_, err = quirev1.NewMetadataClient(rc).GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"nonexistent"}})
	refused(t, "reader asks for a missing topic", err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, "nonexistent")
	// Groups: app- prefixed ones only.
	g := quirev1.NewGroupsClient(rc)
	if _, err := g.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "app-1", Offsets: []*quirev1.OffsetCommit{{Topic: "orders", Partition: 0, Offset: 1}}}); err != nil {
		t.Fatalf("reader commits for app-1: %v", err)
	}
	_, err = g.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "other", Offsets: []*quirev1.OffsetCommit{{Topic: "orders", Partition: 0, Offset: 1}}})
	refused(t, "reader commits for other", err, codes.PermissionDenied, quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, reader, "Read", `group "other"`)
	_, err = g.DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: "app-1"})
	refused(t, "reader deletes app-1", err, codes.PermissionDenied, quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, "Delete")
	_, err = g.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "other"})
	refused(t, "reader joins other", err, codes.PermissionDenied, quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, "other")
	_, err = quirev1.NewAdminClient(rc).DescribeCluster(ctx, &quirev1.DescribeClusterRequest{})
	refused(t, "reader describes the cluster", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, "Describe", "cluster")

	// Deny wins over allow.
	if _, err := admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{acl("User:alice", "Deny", "Write", "Topic", "orders", "Literal")}}); err != nil {
		t.Fatal(err)
	}
	c.Eventually(ctx, "the deny ACL applies", func() error {
		if err := produceAs(withUser(ctx, "alice", "alice-pw"), prodAlice, "orders"); status.Code(err) != codes.PermissionDenied {
			return fmt.Errorf("produce: %v", err)
		}
		return nil
	})
	if err := produceAs(withUser(ctx, "alice", "alice-pw"), prodAlice, "hidden"); err != nil {
		t.Fatalf("alice may still write hidden: %v", err)
	}
	del, err := admin.DeleteAcls(ctx, &quirev1.DeleteAclsRequest{Filters: []*quirev1.Acl{{Permission: "Deny"}}})
	if err != nil || len(del.Deleted) != 1 {
		t.Fatalf("delete deny ACLs: %v %v", del, err)
	}
	list, err := admin.ListAcls(ctx, &quirev1.ListAclsRequest{Filter: &quirev1.Acl{Principal: reader}})
	if err != nil || len(list.Acls) != 2 {
		t.Fatalf("reader's ACLs: %v %v", list, err)
	}
	// A deleted user is refused from the next call on.
	if _, err := admin.DeleteUser(ctx, &quirev1.DeleteUserRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	err = produceAs(withUser(ctx, "alice", "alice-pw"), prodAlice, "hidden")
	refused(t, "deleted user", err, codes.Unauthenticated, quirev1.ErrorCode_SASL_AUTHENTICATION_FAILED, "alice")
	_, err = admin.DeleteUser(ctx, &quirev1.DeleteUserRequest{Name: "alice"})
	refused(t, "delete unknown user", err, codes.NotFound, quirev1.ErrorCode_RESOURCE_NOT_FOUND, "alice")
	_, err = admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{acl("alice", "Allow", "Read", "Topic", "x", "")}})
	refused(t, "bad principal", err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "User:NAME")
	_, err = admin.UpsertUser(ctx, &quirev1.UpsertUserRequest{Name: "bob", Password: ""})
	refused(t, "empty password", err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "password")
}

func TestClusterSecurityPrincipalMappingRules(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec), testcluster.Authorizer(),
		testcluster.Config(func(_ int32, cfg *broker.Config) {
			cfg.Security.PrincipalMappingRules = `RULE:^CN=([^,]*),O=quire$/$1/U,DEFAULT`
			cfg.Security.SuperUsers = "User:NODE-1"
		}))
	ctx := testCtx(t)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionSecurity)
	// Node 1 is User:NODE-1 now, and still a super user: it may grant.
	who, err := quirev1.NewSecurityClient(c.Conn(1)).WhoAmI(ctx, &quirev1.WhoAmIRequest{})
	if err != nil || who.Principal != "User:NODE-1" {
		t.Fatalf("node 1 is %v (%v), want User:NODE-1", who, err)
	}
	if _, err := quirev1.NewSecurityClient(c.Conn(1)).CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{
		acl("User:READER", "Allow", "Describe", "Cluster", "", "")}}); err != nil {
		t.Fatal(err)
	}
	rc := dialAs(t, c, 1, sec.ClientCredentials("reader"))
	who, err = quirev1.NewSecurityClient(rc).WhoAmI(ctx, &quirev1.WhoAmIRequest{})
	if err != nil || who.Principal != "User:READER" || who.AuthenticatedBy != "certificate" {
		t.Fatalf("reader is %v (%v), want User:READER by certificate", who, err)
	}
	if _, err := quirev1.NewAdminClient(rc).DescribeCluster(ctx, &quirev1.DescribeClusterRequest{}); err != nil {
		t.Fatalf("User:READER's ACL does not apply: %v", err)
	}
}
