package kafka

import (
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
	p := func(topic string, n int32) request.SharePartition {
		return request.SharePartition{Topic: topic, Partition: n}
	}
	if _, code, _ := ss.step("g", "m", 3, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("epoch 3 with no session: code %d", code)
	}
	parts, code, err := ss.step("g", "m", 0, []request.SharePartition{p("a", 0), p("a", 1)}, nil)
	if err != nil || len(parts) != 2 {
		t.Fatalf("open: %v, %d, %v", parts, code, err)
	}
	if _, code, _ := ss.step("g", "m", 2, nil, nil); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("epoch 2 where 1 is expected: code %d", code)
	}
	parts, _, err = ss.step("g", "m", 1, []request.SharePartition{p("b", 0)}, []request.SharePartition{p("a", 0)})
	if err != nil || len(parts) != 2 || parts[0].Topic != "a" || parts[0].Partition != 1 || parts[1].Topic != "b" || parts[1].Partition != 0 {
		t.Fatalf("epoch 1 adding b-0, forgetting a-0: %v, %v", parts, err)
	}
	if _, _, err := ss.step("g", "m", -1, nil, nil); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, code, _ := ss.step("g", "m", 2, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("epoch 2 after the close: code %d", code)
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
