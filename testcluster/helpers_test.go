package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/testparallel"
	"github.com/quirelog/quire/testcluster"
)

func TestMain(m *testing.M) {
	testparallel.Raise()
	goleak.VerifyTestMain(m,
		// grpc's package-level goroutines.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		// hashicorp/raft drops the batches still queued for the FSM when
		// it shuts down, so the waiter of a command committed just before
		// a node stopped is never answered (raftApply has returned by then).
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*deferError).Error"),
	)
}

// testCtx bounds a whole test: only to stop a hang, far above what the
// slowest test takes on a loaded machine with others running beside it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func admin(c *testcluster.Cluster, id int32) quirev1.AdminClient {
	return quirev1.NewAdminClient(c.Conn(id))
}

// createTopic creates a topic through node via.
//
// A broker whose heartbeat came late on a loaded machine is fenced until
// its next one, and a replication factor above the live brokers is
// refused meanwhile (INVALID_REPLICATION_FACTOR, nothing created): that
// answer, and a retriable one, is asked again until the deadline (after a
// retriable one, TOPIC_ALREADY_EXISTS is the earlier attempt's topic); any
// other fails the test.
func createTopic(t *testing.T, c *testcluster.Cluster, via int32, name string, partitions, rf int32) *quirev1.TopicDescription {
	t.Helper()
	return createTopicWith(t, c, via, name, partitions, rf, nil)
}

// createTopicWith is createTopic with the topic's configs: asked again
// while fewer brokers than rf are registered yet, or while no controller
// answers.
func createTopicWith(t *testing.T, c *testcluster.Cluster, via int32, name string, partitions, rf int32, configs map[string]string) *quirev1.TopicDescription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var topic *quirev1.TopicDescription
	retried := false
	c.Eventually(ctx, "create topic "+name, func() error {
		resp, err := admin(c, via).CreateTopic(ctx, &quirev1.CreateTopicRequest{
			Name: name, OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: partitions}, OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: rf},
			Configs: configs,
		})
		switch {
		case err == nil:
			topic = resp.Topic
			return nil
		case errorDetail(err).GetCode() == quirev1.ErrorCode_INVALID_REPLICATION_FACTOR && strings.Contains(err.Error(), "live broker"):
			return err
		case errorDetail(err).GetRetriable():
			// No controller answered within the node's bound (an
			// election outlasting it on a loaded machine): asked again,
			// as a client does. The write may have committed meanwhile.
			retried = true
			return err
		case retried && errorDetail(err).GetCode() == quirev1.ErrorCode_TOPIC_ALREADY_EXISTS:
			d, derr := admin(c, via).DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{name}})
			if derr != nil || len(d.Topics) != 1 {
				return fmt.Errorf("describe %s after a retried create: %v", name, derr)
			}
			topic = d.Topics[0]
			return nil
		}
		t.Fatalf("create topic %q through node %d: %v", name, via, err)
		return nil
	})
	return topic
}

// produce sends one record to topic-partition through node via (acks=1).
func produce(ctx context.Context, c *testcluster.Cluster, via int32, topic string, p int32, value string) (*quirev1.RecordResult, error) {
	return produceAcks(ctx, c, via, topic, p, value, 1)
}

// produceAcks is produce with the given acks.
func produceAcks(ctx context.Context, c *testcluster.Cluster, via int32, topic string, p int32, value string, acks int32) (*quirev1.RecordResult, error) {
	resp, err := quirev1.NewProducerClient(c.Conn(via)).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{
		Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: acks}, TimeoutMs: 2000,
		Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: value}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}}},
	})
	if err != nil {
		return nil, err
	}
	return resp.Results[0], nil
}

// produceToLeader produces through the partition's leader as the images
// name it, retrying retriable errors (a leader still opening its replica,
// a leader change) until ctx ends.
func produceToLeader(t *testing.T, c *testcluster.Cluster, topic string, p int32, value string) int64 {
	t.Helper()
	return produceToLeaderAcks(t, c, topic, p, value, 1)
}

// produceToLeaderAcks is produceToLeader with the given acks. A test that
// then stops the leader and counts on the record being kept needs acks=-1:
// with acks=1 the leader may stop before any follower has the record, and
// a follower elected then does not have it (as in Kafka).
func produceToLeaderAcks(t *testing.T, c *testcluster.Cluster, topic string, p int32, value string, acks int32) int64 {
	t.Helper()
	ctx := testCtx(t)
	var offset int64
	c.Eventually(ctx, "produce to "+topic, func() error {
		leader, _ := c.WaitLeader(ctx, topic, p)
		r, err := produceAcks(ctx, c, leader, topic, p, value, acks)
		if err != nil {
			return err
		}
		if r.Error != nil {
			if !r.Error.Retriable {
				t.Fatalf("produce %s-%d on node %d: %v", topic, p, leader, r.Error)
			}
			return errors.New(r.Error.Message)
		}
		offset = r.Offset
		return nil
	})
	return offset
}

// asForwarded marks requests as already passed on by a broker, so that a
// broker that does not lead the partition answers NOT_LEADER_OR_FOLLOWER
// with the leader's name instead of passing them on (see broker/route.go).
func asForwarded(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "quire-forwarded-by", "0")
}

// errorDetail returns the quire.v1.Error in a status error.
func errorDetail(err error) *quirev1.Error {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if e, ok := d.(*quirev1.Error); ok {
			return e
		}
	}
	return nil
}
