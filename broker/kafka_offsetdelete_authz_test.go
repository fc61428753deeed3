package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/metadata"
)

// OffsetDelete under ACLs, as in Kafka: Delete on the group lets a
// principal delete the offsets of the topics it may Read; a topic it may
// not is TOPIC_AUTHORIZATION_FAILED on its own, and a group it may not
// delete from GROUP_AUTHORIZATION_FAILED for the whole request.
func TestBrokerKafkaDeleteOffsetsAuthorized(t *testing.T) {
	t.Parallel()
	s := startSecureKafka(t)
	brokertest.WaitMetadataVersion(t, s.b, metadata.MetadataVersionDeleteOffsets)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadm.NewClient(s.client(t, "SSL", true, "admin", nil))
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: "secret", Partition: 0, At: 0, LeaderEpoch: -1})
	for _, g := range []string{"sg", "sg2"} {
		if err := admin.CommitAllOffsets(ctx, g, offsets); err != nil {
			t.Fatalf("commit %s: %v", g, err)
		}
	}
	acl := kadm.NewACLs().Allow("User:CN=reader,O=quire").Groups("sg").Operations(kadm.OpDelete).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := admin.CreateACLs(ctx, acl); err != nil || rs[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, rs)
	}

	reader := kadm.NewClient(s.client(t, "SSL", true, "reader", nil))
	del, err := reader.DeleteOffsets(ctx, "sg", kadm.TopicsSet{"orders": {0: {}}, "secret": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if del["orders"][0] != nil || !errors.Is(del["secret"][0], kerr.TopicAuthorizationFailed) {
		t.Fatalf("delete offsets: %v, want orders deleted and secret TOPIC_AUTHORIZATION_FAILED", del)
	}
	left, err := admin.FetchOffsets(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := left.Lookup("orders", 0); ok {
		t.Fatal("orders-0 still committed")
	}
	if _, ok := left.Lookup("secret", 0); !ok {
		t.Fatal("secret-0 deleted without Read on secret")
	}
	if _, err := reader.DeleteOffsets(ctx, "sg2", kadm.TopicsSet{"orders": {0: {}}}); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("a group without Delete: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
}
