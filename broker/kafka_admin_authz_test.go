package broker

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
)

// The Kafka admin calls are authorized as gRPC calls that exist, with the
// request those calls take, so authz.go's table applies to them; and
// that check refuses a principal without the ACL with the error the
// Kafka door turns into Kafka's authorization codes, and passes one with
// it.
func TestKafkaAdminAuthorizedAsTheirGRPCCalls(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method string
		req    proto.Message
		grant  auth.ACL // what lets User:alice make it
		refuse error
	}{
		{methodCreateTopic, &quirev1.CreateTopicRequest{Name: "t"}, topicACL(auth.OpCreate), ErrTopicAuthorizationFailed},
		{methodDeleteTopic, &quirev1.DeleteTopicRequest{Name: "t"}, topicACL(auth.OpDelete), ErrTopicAuthorizationFailed},
		{methodCreatePartitions, &quirev1.CreatePartitionsRequest{Topic: "t"}, topicACL(auth.OpAlter), ErrTopicAuthorizationFailed},
		{methodDescribeConfigs, &quirev1.DescribeConfigsRequest{Topic: "t"}, topicACL(auth.OpDescribeConfigs), ErrTopicAuthorizationFailed},
		{methodAlterConfigs, &quirev1.AlterConfigsRequest{Topic: "t"}, topicACL(auth.OpAlterConfigs), ErrTopicAuthorizationFailed},
		{methodDescribeProducers, &quirev1.DescribeProducersRequest{Topic: "t"}, topicACL(auth.OpRead), ErrTopicAuthorizationFailed},
		{methodDescribeCluster, &quirev1.DescribeClusterRequest{}, clusterACL(auth.OpDescribe), ErrClusterAuthorizationFailed},
		{methodDeleteGroup, &quirev1.DeleteGroupRequest{Group: "g"}, auth.ACL{Principal: "User:alice", Permission: auth.Allow,
			Operation: auth.OpDelete, ResourceType: auth.ResourceGroup, ResourceName: "g", PatternType: auth.Literal}, ErrGroupAuthorizationFailed},
		{methodCreateAcls, &quirev1.CreateAclsRequest{}, clusterACL(auth.OpAlter), ErrClusterAuthorizationFailed},
		{methodDeleteAcls, &quirev1.DeleteAclsRequest{}, clusterACL(auth.OpAlter), ErrClusterAuthorizationFailed},
		{methodListAcls, &quirev1.ListAclsRequest{}, clusterACL(auth.OpDescribe), ErrClusterAuthorizationFailed},
		{methodListUsers, &quirev1.ListUsersRequest{}, clusterACL(auth.OpDescribe), ErrClusterAuthorizationFailed},
		{methodDeleteUser, &quirev1.DeleteUserRequest{}, clusterACL(auth.OpAlter), ErrClusterAuthorizationFailed},
		{methodUpsertUser, &quirev1.UpsertUserRequest{}, clusterACL(auth.OpAlter), ErrClusterAuthorizationFailed},
		{methodElectLeaders, &quirev1.ElectLeadersRequest{}, clusterACL(auth.OpAlter), ErrClusterAuthorizationFailed},
	}
	b := &Broker{}
	alice := Identity{Principal: "User:alice", By: "scram"}
	for _, c := range cases {
		in := rpcInput(t, c.method)
		if got := c.req.ProtoReflect().Descriptor().FullName(); in != got {
			t.Errorf("%s takes %s; the Kafka door checks it with a %s", c.method, in, got)
		}
		err := b.checkRequest(auth.NewAuthorizer(nil, nil), alice, c.method, c.req)
		if !errors.Is(err, c.refuse) {
			t.Errorf("%s without an ACL: %v, want %v", c.method, err, c.refuse)
		}
		if st := authStatus(err); status.Code(st) != codes.PermissionDenied {
			t.Errorf("%s refused with %v, want PermissionDenied", c.method, st)
		}
		if err := b.checkRequest(auth.NewAuthorizer([]auth.ACL{c.grant}, nil), alice, c.method, c.req); err != nil {
			t.Errorf("%s with %v: %v", c.method, c.grant, err)
		}
	}
}

func topicACL(op auth.Operation) auth.ACL {
	return auth.ACL{Principal: "User:alice", Permission: auth.Allow, Operation: op, ResourceType: auth.ResourceTopic,
		ResourceName: "t", PatternType: auth.Literal}
}

func clusterACL(op auth.Operation) auth.ACL {
	return auth.ACL{Principal: "User:alice", Permission: auth.Allow, Operation: op, ResourceType: auth.ResourceCluster,
		ResourceName: auth.ClusterName, PatternType: auth.Literal}
}

// rpcInput is the request type of a gRPC method given as /service/name.
func rpcInput(t *testing.T, method string) protoreflect.FullName {
	t.Helper()
	_ = quirev1.File_quire_v1_admin_proto
	_ = quirev1.File_quire_v1_group_proto
	_ = quirev1.File_quire_v1_security_proto
	var svc, name string
	for i := len(method) - 1; i > 0; i-- {
		if method[i] == '/' {
			svc, name = method[1:i], method[i+1:]
			break
		}
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		t.Fatalf("%s: no service %q: %v", method, svc, err)
	}
	m := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if m == nil {
		t.Fatalf("%s: service %s has no method %q", method, svc, name)
	}
	return m.Input().FullName()
}
