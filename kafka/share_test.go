package kafka

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// The share-group APIs are advertised only when served;
// otherwise a request for one closes the connection as any API not
// served does.
func TestKafkaShareVersionsAdvertised(t *testing.T) {
	for _, on := range []bool{false, true} {
		_, k := startServerConfig(t, Config{Backend: &fakeBackend{}, MaxRequestBytes: 1 << 20, ShareGroups: on})
		av := roundTrip[*kmsg.ApiVersionsResponse](k, kmsg.NewPtrApiVersionsRequest())
		var got []int16
		for _, a := range av.ApiKeys {
			if isShareKey(a.ApiKey) {
				wantMin, wantMax := int16(1), int16(2)
				switch a.ApiKey {
				case shareGroupHeartbeatKey, shareGroupDescribeKey:
					wantMax = 1
				case deleteShareGroupOffsetsKey, alterShareGroupOffsetsKey:
					wantMin, wantMax = 0, 0
				case describeShareGroupOffsetsKey:
					wantMin, wantMax = 0, 1
				}
				if a.MinVersion != wantMin || a.MaxVersion != wantMax {
					t.Errorf("key %d advertised %d-%d, want %d-%d", a.ApiKey, a.MinVersion, a.MaxVersion, wantMin, wantMax)
				}
				got = append(got, a.ApiKey)
			}
		}
		slices.Sort(got)
		want := []int16{76, 77, 78, 79, 90, 91, 92}
		if !on {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Fatalf("share groups on=%v: share keys advertised %v, want %v", on, got, want)
		}
		if !on {
			req := kmsg.NewPtrShareFetchRequest()
			req.Version = 1
			k.request(req)
			if !k.closed() {
				t.Fatal("a ShareFetch with share groups off did not close the connection")
			}
		}
	}
}

func TestKafkaShareSessions(t *testing.T) {
	var ss shareSessions
	ctx := context.Background()
	p := func(topic string, n int32) request.SharePartition {
		return request.SharePartition{Topic: topic, Partition: n}
	}
	if _, _, code, _ := ss.step(ctx, nil, "g", "m", 3, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("epoch 3 with no session: code %d", code)
	}
	parts, _, code, err := ss.step(ctx, nil, "g", "m", 0, []request.SharePartition{p("a", 0), p("a", 1)}, nil)
	if err != nil || len(parts) != 2 {
		t.Fatalf("open: %v, %d, %v", parts, code, err)
	}
	if _, _, code, _ := ss.step(ctx, nil, "g", "m", 2, nil, nil); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("epoch 2 where 1 is expected: code %d", code)
	}
	parts, _, _, err = ss.step(ctx, nil, "g", "m", 1, []request.SharePartition{p("b", 0)}, []request.SharePartition{p("a", 0)})
	if err != nil || len(parts) != 2 || parts[0].Topic != "a" || parts[0].Partition != 1 || parts[1].Topic != "b" || parts[1].Partition != 0 {
		t.Fatalf("epoch 1 adding b-0, forgetting a-0: %v, %v", parts, err)
	}
	parts, sess, _, err := ss.step(ctx, nil, "g", "m", -1, nil, nil)
	if err != nil || len(parts) != 2 {
		t.Fatalf("close: %v, %v", parts, err)
	}
	// Being closed (its release under way), the session takes no more
	// requests, and a new one waits for the release: here, until its
	// context ends.
	if _, _, code, _ := ss.step(ctx, nil, "g", "m", 2, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("epoch 2 while closing: code %d", code)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, err := ss.step(gone, nil, "g", "m", 0, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("epoch 0 while the last session is being released: %v, want it to wait", err)
	}
	ss.closed(shareSessionKey{"g", "m"}, sess)
	if _, _, code, _ := ss.step(ctx, nil, "g", "m", 2, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("epoch 2 after the close: code %d", code)
	}
	if _, _, _, err := ss.step(gone, nil, "g", "m", 0, []request.SharePartition{p("a", 0)}, nil); err != nil {
		t.Fatalf("epoch 0 after the close: %v", err)
	}
}

// A connection's end closes the sessions it opened that are still their
// members': not one a new session replaced (a reconnect seen first),
// whose member's records are then the new session's; a new session of a
// member waits for the release of the one being closed.
func TestKafkaShareSessionsOfConnection(t *testing.T) {
	var ss shareSessions
	ctx := context.Background()
	var c1, c2 connState
	a0 := []request.SharePartition{{Topic: "a", Partition: 0}}
	for _, m := range []string{"m1", "m2"} {
		if _, _, _, err := ss.step(ctx, &c1, "g", m, 0, a0, nil); err != nil {
			t.Fatal(err)
		}
	}
	// m2 reconnects on c2 before c1's end is seen.
	_, s2, _, err := ss.step(ctx, &c2, "g", "m2", 0, a0, nil)
	if err != nil {
		t.Fatal(err)
	}
	closing := ss.closeOf(&c1)
	if len(closing) != 1 || closing[shareSessionKey{"g", "m1"}] == nil {
		t.Fatalf("c1's end closes %v, want m1's session alone", closing)
	}
	if closing := ss.closeOf(&c1); len(closing) != 0 {
		t.Fatalf("c1's end seen twice closes %v", closing)
	}
	// m2's new session goes on.
	if parts, s, _, err := ss.step(ctx, &c2, "g", "m2", 1, nil, nil); err != nil || s != s2 || len(parts) != 1 {
		t.Fatalf("m2's new session after c1's end: %v, %v", parts, err)
	}
	// m1 reopening on c2 waits for the release of its session.
	opened := make(chan error, 1)
	go func() {
		_, _, _, err := ss.step(ctx, &c2, "g", "m1", 0, a0, nil)
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("m1's new session opened while its last one was being released: %v", err)
	default:
	}
	for k, s := range closing {
		ss.closed(k, s)
	}
	if err := <-opened; err != nil {
		t.Fatalf("m1's new session after the release: %v", err)
	}
	if closing := ss.closeOf(&c2); len(closing) != 2 {
		t.Fatalf("c2's end closes %d sessions, want 2", len(closing))
	}
}

func TestKafkaShareAcks(t *testing.T) {
	type batch = kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	batches := []batch{
		{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}},
		{FirstOffset: 10, LastOffset: 15, AcknowledgeTypes: []int8{1, 1, 0, 2, 3, 3}},
		{FirstOffset: 20, LastOffset: 21, AcknowledgeTypes: []int8{0}},
		{FirstOffset: 30, LastOffset: 30, AcknowledgeTypes: []int8{4}},
	}
	want := []request.ShareAck{
		{First: 0, Last: 4, Type: request.ShareAccept},
		{First: 10, Last: 11, Type: request.ShareAccept},
		{First: 13, Last: 13, Type: request.ShareRelease},
		{First: 14, Last: 15, Type: request.ShareReject},
		{First: 30, Last: 30, Type: request.ShareRenew},
	}
	if got := shareAcks(2, batches); !slices.Equal(got, want) {
		t.Fatalf("v2 acks %v, want %v", got, want)
	}
	// Before version 2 a renew is an unknown type, for the core to refuse.
	want[4].Type = -1
	if got := shareAcks(1, batches); !slices.Equal(got, want) {
		t.Fatalf("v1 acks %v, want %v", got, want)
	}
}
