package broker_test

import (
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
)

func partitions(n int32) *quirev1.CreateTopicRequest_Partitions {
	return &quirev1.CreateTopicRequest_Partitions{Partitions: n}
}

// sameRefusal checks that a validate-only request and the real one were
// refused alike: the same code, message and quire.v1.Error.
func sameRefusal(t *testing.T, dry, real error) {
	t.Helper()
	a, b := status.Convert(dry), status.Convert(real)
	if a.Code() != b.Code() || a.Message() != b.Message() || len(a.Details()) != len(b.Details()) {
		t.Fatalf("validate_only answered %v %q, the request %v %q", a.Code(), a.Message(), b.Code(), b.Message())
	}
	for i := range a.Details() {
		da, _ := a.Details()[i].(proto.Message)
		db, _ := b.Details()[i].(proto.Message)
		if !proto.Equal(da, db) {
			t.Fatalf("validate_only detail %v, the request's %v", da, db)
		}
	}
}

// A request for 2^31-1 partitions is refused at once, validate_only or
// not, and the node keeps serving.
func TestAdminAbsurdPartitionCountRefused(t *testing.T) {
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "grow", 1, nil)
	for _, n := range []int32{math.MaxInt32, 10002} {
		_, dry := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "huge", OptionalPartitions: partitions(n), ValidateOnly: true})
		wantStatus(t, dry, codes.InvalidArgument, quirev1.ErrorCode_INVALID_PARTITIONS, "huge", "10000")
		_, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "huge", OptionalPartitions: partitions(n)})
		sameRefusal(t, dry, err)

		_, dry = c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "grow", TotalCount: n, ValidateOnly: true})
		wantStatus(t, dry, codes.InvalidArgument, quirev1.ErrorCode_INVALID_PARTITIONS, "grow", "10000")
		_, err = c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "grow", TotalCount: n})
		sameRefusal(t, dry, err)
	}
	// Alive and serving: nothing was created, a new topic takes records.
	_, err := c.admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"huge"}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "huge")
	createTopic(t, c, "after", 2, nil)
	if res := produce(t, c, "after", 1, makeBatch(3, 10, "x")); res.Error != nil {
		t.Fatalf("produce after the refusals: %v", res.Error)
	}
	if res := produce(t, c, "grow", 0, makeBatch(3, 10, "x")); res.Error != nil || res.BaseOffset != 0 {
		t.Fatalf("produce to the topic asked to grow: %+v", res)
	}
}

// A topic create or partition increase beyond max.partitions.per.broker is
// refused with POLICY_VIOLATION naming the broker and the numbers; a
// validate_only request gets the same answer; nothing is created.
func TestAdminPartitionBudget(t *testing.T) {
	_, c := start(t, func(cfg *broker.Config) { cfg.MaxPartitionsPerBroker = 10 })
	ctx := ctxT(t)
	createTopic(t, c, "first", 4, nil)

	// The budget reaches the controller with the broker's heartbeats once
	// metadata.version allows it; until then none is enforced.
	over := &quirev1.CreateTopicRequest{Name: "over", OptionalPartitions: partitions(7), ValidateOnly: true}
	var dry error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, dry = c.admin.CreateTopic(ctx, over); dry != nil || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	wantStatus(t, dry, codes.FailedPrecondition, quirev1.ErrorCode_POLICY_VIOLATION,
		`"over"`, "broker 1 would host 11 partition replicas (4 now, 7 more), over its max.partitions.per.broker of 10")
	_, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "over", OptionalPartitions: partitions(7)})
	sameRefusal(t, dry, err)
	_, err = c.admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"over"}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "over")

	// Up to the budget is fine.
	if _, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "fits", OptionalPartitions: partitions(5), ValidateOnly: true}); err != nil {
		t.Fatalf("validate_only within the budget: %v", err)
	}
	createTopic(t, c, "fits", 5, nil)

	// CreatePartitions: 9 hosted, 2 more would make 11.
	_, dry = c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "fits", TotalCount: 7, ValidateOnly: true})
	wantStatus(t, dry, codes.FailedPrecondition, quirev1.ErrorCode_POLICY_VIOLATION,
		"broker 1 would host 11 partition replicas (9 now, 2 more), over its max.partitions.per.broker of 10")
	_, err = c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "fits", TotalCount: 7})
	sameRefusal(t, dry, err)
	d, err := c.admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"fits"}})
	if err != nil || len(d.Topics[0].Partitions) != 5 {
		t.Fatalf("after the refused increase: %v %v", d, err)
	}
	r, err := c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "fits", TotalCount: 6})
	if err != nil || len(r.Topic.Partitions) != 6 {
		t.Fatalf("increase to the budget: %v %v", r, err)
	}
	// Auto-creation is held to it too.
	md, err := c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"auto"}, AllowAutoTopicCreation: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error.GetCode() != quirev1.ErrorCode_POLICY_VIOLATION {
		t.Fatalf("auto-create past the budget: %v", md.Topics)
	}
}
