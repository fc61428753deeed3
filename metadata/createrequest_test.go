package metadata

import (
	"context"
	"errors"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/internal/poll"
)

// createWith is a create of topic "t" with topic id id and request id
// rid, one partition on broker 1.
func createWith(id, rid string) *pb.Command {
	c := createTopic("t", []int32{1})
	c.GetCreateTopic().TopicId, c.GetCreateTopic().RequestId = id, rid
	return c
}

// A create's request id is kept with the topic, in the image and the
// store, and a second create of the name with it (two attempts of one
// client create that both reached the controller) answers the first
// topic; any other create of the name is refused. It never becomes the
// topic's id: after a delete, the same request id creates a new topic
// with the new id its command carries. Below metadata.version 18 a
// create carrying one is refused, as an older node would drop it.
func TestFSMCreateTopicRequestID(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(featureLevel(MetadataVersionCreateRequestID - 1))
	tf.rejected(createWith("id-1", "R"), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionCreateRequestID))

	first := tf.ok(createWith("id-1", "R")).(TopicInfo)
	if first.ID != "id-1" || first.RequestID != "R" {
		t.Fatalf("created %+v, want id id-1 with request id R", first)
	}
	again, ok := tf.ok(createWith("id-2", "R")).(TopicInfo)
	if !ok || again.ID != "id-1" || len(again.Partitions) != 1 {
		t.Fatalf("the second create with request id R answered %+v, want the topic id-1", again)
	}
	tf.rejected(createWith("id-3", "S"), ErrTopicExists)
	tf.rejected(createWith("id-3", ""), ErrTopicExists)
	if got, _ := tf.storedImage().Topic("t"); got.ID != "id-1" || got.RequestID != "R" {
		t.Fatalf("stored topic %+v, want id-1 with request id R", got)
	}

	tf.ok(&pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: "t", TopicId: "id-1"}}})
	reborn := tf.ok(createWith("id-4", "R")).(TopicInfo)
	if reborn.ID != "id-4" {
		t.Fatalf("create with request id R after the delete answered %+v, want a new topic id-4", reborn)
	}
	if got, _ := tf.f.Image().Topic("t"); got.ID != "id-4" || got.RequestID != "R" {
		t.Fatalf("image has %+v, want the new topic id-4", got)
	}
}

// The controller keeps a create's request id from metadata.version 18:
// a create of the name with the same request id answers the topic it
// made, a deleted topic's request id creates a new one with a new id.
// Below 18 it leaves the request id out, and a retry is ErrTopicExists.
func TestControllerCreateTopicRequestID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		versions VersionRange
		keeps    bool
	}{
		{"latest", SupportedMetadataVersions(), true},
		{"below 18", VersionRange{Min: MetadataVersionBaseline, Max: MetadataVersionCreateRequestID - 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCluster(t, 1, 0, nil)
			n := c.waitController()
			ctx := context.Background()
			info := BrokerInfo{ID: 1, Incarnation: "a", Addr: "node1", MetadataVersions: tc.versions}
			epoch, err := n.Ctl().RegisterBroker(ctx, info)
			if err != nil {
				t.Fatal(err)
			}
			poll.True(t, "the broker unfenced at its highest level", func() bool {
				if err := n.Ctl().Heartbeat(ctx, 1, "a", epoch, 0); err != nil {
					t.Logf("heartbeat: %v", err)
				}
				b, _ := n.Image().Broker(1)
				return !b.Fenced && n.Image().MetadataVersion() == tc.versions.Max
			})
			spec := TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1, RequestID: "R"}
			first, err := n.Ctl().CreateTopic(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: "R", false: ""}[tc.keeps]; first.RequestID != want {
				t.Fatalf("created %+v, want request id %q", first, want)
			}
			again, err := n.Ctl().CreateTopic(ctx, spec)
			if !tc.keeps {
				if !errors.Is(err, ErrTopicExists) {
					t.Fatalf("a retry below 18: %+v, %v; want ErrTopicExists", again, err)
				}
				return
			}
			if err != nil || again.ID != first.ID {
				t.Fatalf("a retry: %+v, %v; want the topic %s", again, err, first.ID)
			}
			if _, err := n.Ctl().CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1, RequestID: "S"}); !errors.Is(err, ErrTopicExists) {
				t.Fatalf("another request id: %v, want ErrTopicExists", err)
			}
			if err := n.Ctl().DeleteTopic(ctx, "t", first.ID); err != nil {
				t.Fatal(err)
			}
			reborn, err := n.Ctl().CreateTopic(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			if reborn.ID == first.ID || reborn.RequestID != "R" {
				t.Fatalf("after the delete request id R created %+v, want a new id (the old one was %s)", reborn, first.ID)
			}
		})
	}
}
