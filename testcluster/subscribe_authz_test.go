package testcluster_test

import (
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterSecuritySubscribe: a Subscribe stream is a door over the
// request core, held to the ACLs by the core as the stream's principal:
// without Read on a topic it names it is refused TOPIC_AUTHORIZATION_FAILED,
// without Read on its group GROUP_AUTHORIZATION_FAILED; with both, the
// records it sends are FetchRecords' (the same offsets, values,
// timestamps and leader epochs) and the offsets it commits are where
// FetchRecords ends; a Deny of Read on the topic added while a stream
// runs ends that stream with the core's refusal.
func TestClusterSecuritySubscribe(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec), testcluster.Authorizer())
	ctx := subCtx(t)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionIdempotentWrite) // ACLs, producer ids
	const topic, group, parts, n = "orders", "readers", 2, 20
	createTopic(t, c, 1, topic, parts, 1)
	produceN(ctx, t, c, topic, parts, n, "v")

	const who = "User:CN=reader,O=quire"
	cc := dialAs(t, c, 1, sec.ClientCredentials("reader"))
	gc, cons := quirev1.NewGroupsClient(cc), quirev1.NewConsumerClient(cc)
	admin := quirev1.NewSecurityClient(c.Conn(1))
	allow := func(acls ...*quirev1.Acl) {
		t.Helper()
		if _, err := admin.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: acls}); err != nil {
			t.Fatal(err)
		}
	}
	start := &quirev1.SubscribeStart{Group: group, Subscription: &quirev1.GroupSubscription{Topics: []string{topic}}, Batches: true}

	refused(t, "Subscribe without ACLs", subscribeOnce(ctx, gc, start), codes.PermissionDenied,
		quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, who, "Read", topic)
	allow(acl(who, "Allow", "Read", "Topic", topic, "Literal"))
	refused(t, "Subscribe with Read on the topic alone", subscribeOnce(ctx, gc, start), codes.PermissionDenied,
		quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, who, "Read", group)
	allow(acl(who, "Allow", "Read", "Group", group, "Literal"))

	s := subscribeWith(t, gc, "reader", start, true)
	s.wait(ctx, "every record", func() bool {
		return len(s.records[tpName(topic, 0)]) == n && len(s.records[tpName(topic, 1)]) == n
	})
	// The stream ends cleanly on CloseSend, committing what was acked.
	if err := s.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream ended with %v, want a clean end", err)
	}
	for p := range int32(parts) {
		want, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: topic, Partition: p, MaxRecords: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got := s.records[tpName(topic, p)]
		if len(got) != len(want.Records) {
			t.Fatalf("%s: Subscribe sent %d records, FetchRecords has %d", tpName(topic, p), len(got), len(want.Records))
		}
		for i := range got {
			if !proto.Equal(got[i], want.Records[i]) {
				t.Fatalf("%s record %d: Subscribe sent %v, FetchRecords has %v", tpName(topic, p), i, got[i], want.Records[i])
			}
		}
		committed, err := committedAt(ctx, c, 1, group, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if committed != want.NextOffset || committed != n {
			t.Fatalf("%s: committed %d, FetchRecords' next offset %d, want both %d", tpName(topic, p), committed, want.NextOffset, n)
		}
	}

	// Read taken away from a stream running: its next fetch is refused.
	s = subscribeWith(t, gc, "reader again", start, true)
	s.wait(ctx, "the assignment", func() bool { return len(s.owned) == parts })
	allow(acl(who, "Deny", "Read", "Topic", topic, "Literal"))
	select {
	case <-s.done:
	case <-ctx.Done():
		t.Fatal("the stream still runs after Read on its topic was denied")
	}
	refused(t, "Subscribe after Read was denied", s.err, codes.PermissionDenied, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, who, "Read", topic)
}
