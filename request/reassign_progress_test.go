package request_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
)

// movingCluster is cluster with a topic "m": partition 0 moving from
// broker 2 onto 3, this broker and 5 (which no broker answers for),
// partition 1 not moving.
type movingCluster struct{ cluster }

func (movingCluster) Topic(name string) (metadata.TopicInfo, bool) {
	if name != "m" {
		return metadata.TopicInfo{}, false
	}
	return metadata.TopicInfo{Name: "m", Partitions: []metadata.PartitionInfo{
		{Topic: "m", Partition: 0, Leader: 2, LeaderEpoch: 3, Replicas: []int32{3, self, 5, 2}, ISR: []int32{2},
			AddingReplicas: []int32{3, self, 5}, RemovingReplicas: []int32{2}},
		{Topic: "m", Partition: 1, Leader: 2, LeaderEpoch: 3, Replicas: []int32{2}, ISR: []int32{2}},
	}}, true
}

func (c movingCluster) Topics() []metadata.TopicInfo {
	t, _ := c.Topic("m")
	return []metadata.TopicInfo{t}
}

// sizedLogs answers for broker 2 as the leader of its partitions (a log
// of 1,000 bytes) and for broker 3 as a follower that has 400 of them.
type sizedLogs struct{}

func (sizedLogs) DescribeLogs(_ context.Context, br metadata.BrokerInfo, refs []request.LogRef) ([]request.LogDescription, error) {
	out := make([]request.LogDescription, len(refs))
	for i, r := range refs {
		switch br.ID {
		case 2:
			out[i] = request.LogDescription{Topic: r.Topic, Partition: r.Partition, Hosted: true, Leader: true, LogEndOffset: 50, SizeBytes: 1000}
		case 3:
			out[i] = request.LogDescription{Topic: r.Topic, Partition: r.Partition, Hosted: true, LogEndOffset: 20, SizeBytes: 400}
		default:
			return nil, errors.New("unreachable")
		}
	}
	return out, nil
}

// The pending moves come with each adding replica's bytes left: the
// leader's size less its own; the whole leader's log for a replica not
// created yet (this broker hosts no "m"); -1 for one no broker answered
// for. A partition not moving is not listed.
func TestCoreReassignmentProgress(t *testing.T) {
	t.Parallel()
	f := newCore(t, func(c *request.Config) { c.Cluster = movingCluster{}; c.Logs = sizedLogs{} })
	got, err := f.core.ListPartitionReassignmentsProgress(ctxT(t), nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("progress: %v %+v", err, got)
	}
	p := got[0]
	if p.Partition != 0 || !slices.Equal(p.AddingReplicas, []int32{3, self, 5}) || p.LeaderLogEndOffset != 50 || p.LeaderSizeBytes != 1000 {
		t.Fatalf("partition %+v", p)
	}
	want := []request.AddingReplicaProgress{
		{BrokerID: 3, LogEndOffset: 20, SizeBytes: 400, BytesLeft: 600},
		{BrokerID: self, LogEndOffset: -1, SizeBytes: 0, BytesLeft: 1000},
		{BrokerID: 5, LogEndOffset: -1, SizeBytes: -1, BytesLeft: -1},
	}
	if !slices.Equal(p.Adding, want) {
		t.Fatalf("adding replicas %+v, want %+v", p.Adding, want)
	}
	if _, err := f.core.ListPartitionReassignmentsProgress(ctxT(t), []request.PartitionsOf{{Topic: "nope"}}); code(t, err) != 3 {
		t.Fatalf("an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
