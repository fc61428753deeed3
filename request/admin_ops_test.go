package request_test

import (
	"fmt"
	"testing"

	"github.com/quirelog/quire/request"
)

// OffsetDelete needs Delete on the group, whose refusal refuses the whole
// call, and Read on each topic: all or nothing as the gRPC API asks, or
// topic by topic as Kafka's does, a topic refused answered on its own
// and never asked of the coordinator.
func TestCoreDeleteOffsets(t *testing.T) {
	t.Parallel()
	topics := []request.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}, {Topic: "busy", Partitions: []int32{0}},
		{Topic: "secret", Partitions: []int32{2}}}
	f := newGroupCore(t, grants{"DELETE GROUP g", "READ TOPIC t", "READ TOPIC busy"})
	f.coord.offsets["g"] = []request.CommittedOffset{{Topic: "t", Partition: 0, Offset: 1}}
	ctx := alice(t)

	if _, err := f.core.DeleteOffsets(ctx, &request.DeleteOffsetsRequest{Group: "g", Topics: topics, AllOrNothing: true}); code(t, err) != 29 {
		t.Fatalf("all or nothing with a topic not readable: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if len(f.coord.offsetDeletes) != 0 {
		t.Fatalf("a refused call reached the coordinator: %v", f.coord.offsetDeletes)
	}
	res, err := f.core.DeleteOffsets(ctx, &request.DeleteOffsetsRequest{Group: "g", Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, r := range res {
		c := int32(0)
		if r.Err != nil {
			c = r.Err.Code
		}
		got += fmt.Sprintf("%s-%d:%d ", r.Topic, r.Partition, c)
	}
	if want := "t-0:0 t-1:0 busy-0:86 secret-2:29 "; got != want {
		t.Fatalf("topic by topic: %s, want %s", got, want)
	}
	if fmt.Sprint(f.coord.offsetDeletes) != "[g t g busy]" {
		t.Fatalf("the coordinator was asked %v", f.coord.offsetDeletes)
	}

	// Every topic refused: nothing is asked, each partition refused.
	res, err = f.core.DeleteOffsets(ctx, &request.DeleteOffsetsRequest{Group: "g", Topics: topics[2:]})
	if err != nil || len(res) != 1 || res[0].Err == nil || res[0].Err.Code != 29 || len(f.coord.offsetDeletes) != 2 {
		t.Fatalf("every topic refused: %+v, %v (coordinator asked %v)", res, err, f.coord.offsetDeletes)
	}
	// The group's refusal and the coordinator's are the call's.
	for _, mode := range []bool{false, true} {
		if _, err := f.core.DeleteOffsets(ctx, &request.DeleteOffsetsRequest{Group: "h", Topics: topics[:1], AllOrNothing: mode}); code(t, err) != 30 {
			t.Errorf("group h without Delete (all or nothing %v): %v, want GROUP_AUTHORIZATION_FAILED", mode, err)
		}
	}
	f = newGroupCore(t, nil)
	if _, err := f.core.DeleteOffsets(ctx, &request.DeleteOffsetsRequest{Group: "none", Topics: topics[:1]}); code(t, err) != 69 {
		t.Errorf("unknown group: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

// ElectLeaders needs Alter on the cluster, and passes each partition's
// answer on as the controller gave it.
func TestCoreElectLeaders(t *testing.T) {
	t.Parallel()
	c, ctl := adminCore(t, func(cfg *request.Config) {
		cfg.Authorizer, cfg.Codes = grants{"ALTER CLUSTER kafka-cluster"}, groupCodes
	})
	topics := []request.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}
	if _, err := c.ElectLeaders(request.WithPrincipal(ctxT(t), "User:bob"), topics); code(t, err) != 31 {
		t.Fatalf("without Alter on the cluster: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if w := ctl.written(); w != "" {
		t.Fatalf("a refused election reached the controller: %s", w)
	}
	res, err := c.ElectLeaders(alice(t), topics)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Err != nil || res[1].Err == nil || res[1].Err.Code != 84 || ctl.written() != "elect t [0 1]" {
		t.Fatalf("elected %+v; the controller was asked %q", res, ctl.written())
	}
}

// DescribeLogDirs needs Describe on the cluster and lists the log
// directory's replicas.
func TestCoreDescribeLogDirs(t *testing.T) {
	t.Parallel()
	f := newCore(t, func(cfg *request.Config) {
		cfg.Authorizer, cfg.Codes, cfg.LogDir = grants{"DESCRIBE CLUSTER kafka-cluster"}, groupCodes, "/data"
	})
	if _, err := f.core.DescribeLogDirs(request.WithPrincipal(ctxT(t), "User:bob")); code(t, err) != 31 {
		t.Fatalf("without Describe on the cluster: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	dirs, err := f.core.DescribeLogDirs(alice(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 || dirs[0].Path != "/data" || dirs[0].TotalBytes != -1 || len(dirs[0].Partitions) != 1 ||
		dirs[0].Partitions[0].Topic != "t" || dirs[0].Partitions[0].Partition != 0 {
		t.Fatalf("log dirs %+v", dirs)
	}
	if _, err := newCore(t, nil).core.DescribeLogDirs(ctxT(t)); code(t, err) != 42 {
		t.Fatalf("a node without a log directory: %v, want INVALID_REQUEST", err)
	}
}
