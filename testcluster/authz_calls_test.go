package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// securedCall is one public call, the code its refusal carries for a
// principal without ACLs, and the ACL that lets it through.
type securedCall struct {
	name       string
	code       quirev1.ErrorCode
	op, rt, on string // the ACL that allows it
	call       func(ctx context.Context, cc *grpc.ClientConn) error
}

func securedCalls() []securedCall {
	const topic, group = "orders", "g1"
	rec := []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "v"}}}
	tf, gf, cf := quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED
	adm := func(cc *grpc.ClientConn) quirev1.AdminClient { return quirev1.NewAdminClient(cc) }
	grp := func(cc *grpc.ClientConn) quirev1.GroupsClient { return quirev1.NewGroupsClient(cc) }
	sec := func(cc *grpc.ClientConn) quirev1.SecurityClient { return quirev1.NewSecurityClient(cc) }
	cons := func(cc *grpc.ClientConn) quirev1.ConsumerClient { return quirev1.NewConsumerClient(cc) }
	return []securedCall{
		{"CreateTopic", tf, "Create", "Topic", "new-topic", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "new-topic"})
			return err
		}},
		{"DeleteTopic", tf, "Delete", "Topic", "no-such-topic", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "no-such-topic"})
			return err
		}},
		{"DescribeTopics", tf, "Describe", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{topic}})
			return err
		}},
		{"DescribeConfigs", tf, "DescribeConfigs", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).DescribeConfigs(ctx, &quirev1.DescribeConfigsRequest{Topic: topic})
			return err
		}},
		{"AlterConfigs", tf, "AlterConfigs", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: topic, Set: map[string]string{"retention.ms": "60000"}, ValidateOnly: true})
			return err
		}},
		{"CreatePartitions", tf, "Alter", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: topic, TotalCount: 2, ValidateOnly: true})
			return err
		}},
		{"DescribeProducers", tf, "Read", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).DescribeProducers(ctx, &quirev1.DescribeProducersRequest{Topic: topic})
			return err
		}},
		{"DeleteRecords", tf, "Delete", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).DeleteRecords(ctx, &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: topic}}})
			return err
		}},
		{"DescribeCluster", cf, "Describe", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).DescribeCluster(ctx, &quirev1.DescribeClusterRequest{})
			return err
		}},
		{"DescribeFeatures", cf, "Describe", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).DescribeFeatures(ctx, &quirev1.DescribeFeaturesRequest{})
			return err
		}},
		{"UnregisterBroker", cf, "Alter", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).UnregisterBroker(ctx, &quirev1.UnregisterBrokerRequest{BrokerId: 99})
			return err
		}},
		{"UpdateFeatures", cf, "Alter", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).UpdateFeatures(ctx, &quirev1.UpdateFeaturesRequest{MetadataVersion: 1})
			return err
		}},
		{"ElectLeaders", cf, "Alter", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := adm(cc).ElectLeaders(ctx, &quirev1.ElectLeadersRequest{Topics: []*quirev1.ElectLeadersTopic{{Topic: topic}}})
			return err
		}},
		{"Produce", tf, "Write", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := quirev1.NewProducerClient(cc).Produce(ctx, &quirev1.ProduceRequest{Partitions: []*quirev1.PartitionRecords{{Topic: topic, Records: []byte("not a batch")}}})
			return err
		}},
		{"ProduceRecords", tf, "Write", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := quirev1.NewProducerClient(cc).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic, Records: rec})
			return err
		}},
		{"ProduceStream", tf, "Write", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			s, err := quirev1.NewProducerClient(cc).ProduceStream(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(&quirev1.ProduceRequest{Partitions: []*quirev1.PartitionRecords{{Topic: topic, Records: []byte("not a batch")}}}); err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"InitProducerId", cf, "IdempotentWrite", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := quirev1.NewProducerClient(cc).InitProducerId(ctx, &quirev1.InitProducerIdRequest{})
			return err
		}},
		{"Fetch", tf, "Read", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cons(cc).Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: topic}}})
			return err
		}},
		{"FetchStream", tf, "Read", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			s, err := cons(cc).FetchStream(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: topic}}})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"FetchRecords", tf, "Read", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cons(cc).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: topic})
			return err
		}},
		{"FetchRecordsMulti", tf, "Read", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cons(cc).FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: []*quirev1.FetchRecordsPartition{{Topic: topic}}})
			return err
		}},
		{"ListOffsets", tf, "Describe", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cons(cc).ListOffsets(ctx, &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{{Topic: topic}}})
			return err
		}},
		{"GetMetadata", tf, "Describe", "Topic", topic, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := quirev1.NewMetadataClient(cc).GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{topic}})
			return err
		}},
		{"CommitOffsets", gf, "Read", "Group", group, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := grp(cc).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: group})
			return err
		}},
		{"FetchOffsets", gf, "Describe", "Group", group, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := grp(cc).FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: group})
			return err
		}},
		{"DeleteGroup", gf, "Delete", "Group", group, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := grp(cc).DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: group})
			return err
		}},
		{"DeleteOffsets", gf, "Delete", "Group", group, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := grp(cc).DeleteOffsets(ctx, &quirev1.DeleteOffsetsRequest{Group: group})
			return err
		}},
		{"ConsumerGroupHeartbeat", gf, "Read", "Group", group, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := grp(cc).ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: group})
			return err
		}},
		{"Subscribe", gf, "Read", "Group", group, func(ctx context.Context, cc *grpc.ClientConn) error {
			// A regular expression no topic matches: the group alone is
			// asked for.
			return subscribeOnce(ctx, grp(cc), &quirev1.SubscribeStart{Group: group, Subscription: &quirev1.GroupSubscription{Regex: "^no-topic-matches$"}})
		}},
		{"DescribeGroup", gf, "Describe", "Group", group, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := grp(cc).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: group})
			return err
		}},
		{"UpsertUser", cf, "Alter", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := sec(cc).UpsertUser(ctx, &quirev1.UpsertUserRequest{Name: "u", Password: "p"})
			return err
		}},
		{"DeleteUser", cf, "Alter", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := sec(cc).DeleteUser(ctx, &quirev1.DeleteUserRequest{Name: "nobody-at-all"})
			return err
		}},
		{"ListUsers", cf, "Describe", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := sec(cc).ListUsers(ctx, &quirev1.ListUsersRequest{})
			return err
		}},
		{"CreateAcls", cf, "Alter", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := sec(cc).CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{acl("User:x", "Allow", "Read", "Topic", "x", "")}})
			return err
		}},
		{"DeleteAcls", cf, "Alter", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := sec(cc).DeleteAcls(ctx, &quirev1.DeleteAclsRequest{Filters: []*quirev1.Acl{{Principal: "User:x"}}})
			return err
		}},
		{"ListAcls", cf, "Describe", "Cluster", "", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := sec(cc).ListAcls(ctx, &quirev1.ListAclsRequest{})
			return err
		}},
	}
}

// subscribeOnce starts a Subscribe stream and reads its first answer (an
// assignment, once the member joined), then closes it.
func subscribeOnce(ctx context.Context, gc quirev1.GroupsClient, start *quirev1.SubscribeStart) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := gc.Subscribe(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}); err != nil {
		return err
	}
	resp, err := s.Recv()
	if err != nil {
		return err
	}
	if resp.GetAssignment() == nil {
		return fmt.Errorf("subscribe: first answer %v, want the assignment", resp)
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestClusterSecurityEveryCallNeedsItsACL refuses every public call to a
// principal without ACLs, with the code of its resource type and a
// message naming principal, operation and resource; then grants each its
// one ACL and finds it let through, and a deny ACL over it refusing again.
func TestClusterSecurityEveryCallNeedsItsACL(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec), testcluster.Authorizer())
	ctx := testCtx(t)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionIdempotentWrite)
	createTopic(t, c, 1, "orders", 1, 1)
	admin := quirev1.NewSecurityClient(c.Conn(1))
	const who = "User:CN=nobody,O=quire"
	cc := dialAs(t, c, 1, sec.ClientCredentials("nobody"))
	for _, sc := range securedCalls() {
		t.Run(sc.name, func(t *testing.T) {
			ctx := testCtx(t)
			name := sc.on
			if name == "" {
				name = "kafka-cluster"
			}
			t.Cleanup(func() {
				if _, err := admin.DeleteAcls(context.Background(), &quirev1.DeleteAclsRequest{Filters: []*quirev1.Acl{{Principal: who}}}); err != nil {
					t.Error(err)
				}
			})
			refused(t, sc.name+" without ACLs", sc.call(ctx, cc), codes.PermissionDenied, sc.code, who, sc.op, name)
			allow := acl(who, "Allow", sc.op, sc.rt, sc.on, "Literal")
			if _, err := admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{allow}}); err != nil {
				t.Fatal(err)
			}
			if err := sc.call(ctx, cc); status.Code(err) == codes.PermissionDenied {
				t.Fatalf("%s with %s %s on %s: still refused: %v", sc.name, sc.op, sc.rt, name, err)
			}
			deny := acl(who, "Deny", sc.op, sc.rt, sc.on, "Literal")
			if _, err := admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{deny}}); err != nil {
				t.Fatal(err)
			}
			refused(t, sc.name+" with a deny over the allow", sc.call(ctx, cc), codes.PermissionDenied, sc.code, who, sc.op)
		})
	}
}

// TestClusterSecurityInitProducerIdByTopicWrite: as Kafka's idempotent
// producers (KIP-679), Write on some topic is enough for InitProducerId
// without IdempotentWrite on the cluster; a Deny over that Write refuses
// it again with CLUSTER_AUTHORIZATION_FAILED, and a principal with
// neither can bump no producer's epoch.
func TestClusterSecurityInitProducerIdByTopicWrite(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec), testcluster.Authorizer())
	ctx := testCtx(t)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionSecurity)
	createTopic(t, c, 1, "orders", 1, 1)
	admin := quirev1.NewSecurityClient(c.Conn(1))
	const who = "User:CN=writer,O=quire"
	cc := dialAs(t, c, 1, sec.ClientCredentials("writer"))
	pc := quirev1.NewProducerClient(cc)
	// The node itself (a super user) gets an id, which the writer then
	// tries to bump.
	own, err := quirev1.NewProducerClient(c.Conn(1)).InitProducerId(ctx, &quirev1.InitProducerIdRequest{})
	if err != nil {
		t.Fatal(err)
	}
	bump := &quirev1.InitProducerIdRequest{OptionalProducerId: &quirev1.InitProducerIdRequest_ProducerId{ProducerId: own.ProducerId}, ProducerEpoch: own.ProducerEpoch}
	_, err = pc.InitProducerId(ctx, bump)
	refused(t, "InitProducerId bump without ACLs", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who, "IdempotentWrite", "Write on any topic")
	_, err = pc.InitProducerId(ctx, &quirev1.InitProducerIdRequest{})
	refused(t, "InitProducerId without ACLs", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who, "IdempotentWrite")

	if _, err := admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{acl(who, "Allow", "Write", "Topic", "ord", "Prefixed")}}); err != nil {
		t.Fatal(err)
	}
	// One node: the ACL is in its image once CreateAcls answered.
	got, err := pc.InitProducerId(ctx, &quirev1.InitProducerIdRequest{})
	if err != nil || got.ProducerId < 0 || got.ProducerId == own.ProducerId {
		t.Fatalf("InitProducerId with Write on topics ord*: %v, %v", got, err)
	}
	if _, err := admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{acl(who, "Deny", "Write", "Topic", "*", "Literal")}}); err != nil {
		t.Fatal(err)
	}
	_, err = pc.InitProducerId(ctx, &quirev1.InitProducerIdRequest{})
	refused(t, "InitProducerId with Write denied on every topic", err, codes.PermissionDenied, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, who)
}
