package subscribe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/request"
)

// The consumer-group tests' fake serves no share groups.

func (f *fakeBroker) ShareGroupHeartbeat(context.Context, *request.ShareHeartbeat) (*request.ShareHeartbeatResult, error) {
	return nil, request.ErrShareGroupsDisabled
}

func (f *fakeBroker) ShareFetch(context.Context, *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	return nil, request.ErrShareGroupsDisabled
}

func (f *fakeBroker) ShareAcknowledge(context.Context, string, string, []request.SharePartition) ([]request.ShareAckResult, error) {
	return nil, request.ErrShareGroupsDisabled
}

func (f *fakeBroker) ShareAcknowledgeRouted(context.Context, string, string, bool, []request.SharePartition) ([]request.ShareAckResult, error) {
	return nil, request.ErrShareGroupsDisabled
}

func (f *fakeBroker) ShareLockDuration(string) time.Duration { return 0 }

func (f *fakeBroker) ShareGroupRequireKeyOrdering(context.Context, string) error {
	return request.ErrShareGroupsDisabled
}

// TestServeSharedRefusesBadStart: a start that mixes the modes, or a
// SHARED one with consumer-group settings, ends the stream
// INVALID_REQUEST before anything joins.
func TestServeSharedRefusesBadStart(t *testing.T) {
	t.Parallel()
	topics := &quirev1.GroupSubscription{Topics: []string{"t"}}
	for name, st := range map[string]*quirev1.SubscribeStart{
		"key_ordered without SHARED": {Group: "g", Subscription: topics, KeyOrdered: true},
		"unknown mode":               {Group: "g", Subscription: topics, Mode: 7},
		"SHARED with a regex":        {Group: "g", Subscription: &quirev1.GroupSubscription{Regex: "t.*"}, Mode: quirev1.SubscribeMode_SHARED},
		"SHARED with no group":       {Subscription: topics, Mode: quirev1.SubscribeMode_SHARED},
		"SHARED with an instance id": {Group: "g", Subscription: topics, Mode: quirev1.SubscribeMode_SHARED, InstanceId: "i"},
		"SHARED with a reset":        {Group: "g", Subscription: topics, Mode: quirev1.SubscribeMode_SHARED, AutoOffsetReset: "latest"},
		"SHARED negative credit":     {Group: "g", Subscription: topics, Mode: quirev1.SubscribeMode_SHARED, MaxOutstandingRecords: -1},
	} {
		t.Run(name, func(t *testing.T) {
			b := newFakeBroker()
			st2 := newFakeStream(context.Background())
			wait := serve(b, st2, st)
			err := wait(t)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("stream ended with %v, want an invalid request", err)
			}
			if log := b.log(); len(log) != 0 {
				t.Errorf("the broker was called: %v", log)
			}
		})
	}
}

// shareCoreFake records the acknowledgements a SHARED stream passes on
// and refuses a partition's when told to.
type shareCoreFake struct {
	acked  []request.SharePartition
	refuse map[string]error // by topic
}

func (f *shareCoreFake) ShareGroupHeartbeat(context.Context, *request.ShareHeartbeat) (*request.ShareHeartbeatResult, error) {
	return nil, errors.New("fake: no heartbeats")
}

func (f *shareCoreFake) ShareFetch(context.Context, *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	return nil, errors.New("fake: no fetches")
}

func (f *shareCoreFake) ShareAcknowledge(_ context.Context, _, _ string, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	out := make([]request.ShareAckResult, len(parts))
	for i, p := range parts {
		f.acked = append(f.acked, p)
		out[i] = request.ShareAckResult{Topic: p.Topic, Partition: p.Partition, Err: f.refuse[p.Topic]}
	}
	return out, nil
}

func (f *shareCoreFake) ShareAcknowledgeRouted(ctx context.Context, group, member string, _ bool, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	return f.ShareAcknowledge(ctx, group, member, parts)
}

func (f *shareCoreFake) ShareLockDuration(string) time.Duration { return time.Minute }

func (f *shareCoreFake) ShareGroupRequireKeyOrdering(context.Context, string) error { return nil }

func (f *shareCoreFake) DeniedTopics(context.Context, auth.Operation, []string) map[string]error {
	return nil
}

// shareCodes is a Broker whose error codes are the broker's for the
// refusals of acknowledgements.
type shareCodes struct{ *fakeBroker }

func (shareCodes) Error(err error) *quirev1.Error {
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return &quirev1.Error{Code: quirev1.ErrorCode_INVALID_REQUEST, Message: err.Error()}
	case errors.Is(err, request.ErrShareRecordNotHeld):
		return &quirev1.Error{Code: quirev1.ErrorCode_INVALID_RECORD_STATE, Message: err.Error()}
	}
	return &quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_SERVER_ERROR, Message: err.Error()}
}

// TestServeSharedAcknowledge walks the acknowledgement rules of a SHARED
// stream holding offsets 10-14 of a-0 and 0-1 of b-0: each malformed
// range, each naming a record not held and each overlapping an earlier
// one is refused alone with its code; the rest reach the core in one
// call, each partition's in offset order; a partition the core refuses
// has all its ranges refused and stays held; accepted, released and
// rejected records are the stream's no more (its credit freed), renewed
// ones still are.
func TestServeSharedAcknowledge(t *testing.T) {
	t.Parallel()
	core := &shareCoreFake{refuse: map[string]error{"b": errors.New("fake: lock ran out")}}
	st := &quirev1.SubscribeStart{Group: "g", Subscription: &quirev1.GroupSubscription{Topics: []string{"a", "b"}}, Mode: quirev1.SubscribeMode_SHARED}
	s, err := newSharedStream(core, shareCodes{newFakeBroker()}, newFakeStream(context.Background()), st)
	if err != nil {
		t.Fatal(err)
	}
	s.ctx, s.lockFor = context.Background(), time.Minute
	s.parts = []partKey{{"a", 0}, {"b", 0}}
	deadline := time.Now().Add(time.Minute)
	hold := func(k partKey, offs ...int64) {
		s.held[k] = map[int64]sharedLock{}
		for _, o := range offs {
			s.held[k][o] = sharedLock{deadline: deadline}
			s.nHeld++
		}
	}
	hold(partKey{"a", 0}, 10, 11, 12, 13, 14)
	hold(partKey{"b", 0}, 0, 1)
	r := func(topic string, first, last int64, typ quirev1.ShareAckType) *quirev1.ShareAckRange {
		return &quirev1.ShareAckRange{Topic: topic, FirstOffset: first, LastOffset: last, Type: typ}
	}
	acks := []*quirev1.ShareAckRange{
		r("a", 13, 14, quirev1.ShareAckType_SHARE_RENEW),   // applied
		r("a", 10, 11, quirev1.ShareAckType_SHARE_ACCEPT),  // applied, sent first
		r("a", 11, 12, quirev1.ShareAckType_SHARE_REJECT),  // overlaps 10-11
		r("a", 12, 12, quirev1.ShareAckType(9)),            // unknown type
		r("a", 12, 9, quirev1.ShareAckType_SHARE_ACCEPT),   // first after last
		r("a", 15, 15, quirev1.ShareAckType_SHARE_ACCEPT),  // not held
		r("a", 9, 15, quirev1.ShareAckType_SHARE_ACCEPT),   // more than held
		r("c", 0, 0, quirev1.ShareAckType_SHARE_ACCEPT),    // not assigned
		r("b", 0, 1, quirev1.ShareAckType_SHARE_RELEASE),   // refused by the core
		r("a", 12, 12, quirev1.ShareAckType_SHARE_RELEASE), // applied
	}
	res := s.acknowledge(&quirev1.ShareAcks{Id: 7, Ranges: acks})
	if res.Id != 7 || len(res.Ranges) != len(acks) {
		t.Fatalf("answered id %d with %d ranges", res.Id, len(res.Ranges))
	}
	ok, bad, notHeld, other := quirev1.ErrorCode_NONE, quirev1.ErrorCode_INVALID_REQUEST, quirev1.ErrorCode_INVALID_RECORD_STATE, quirev1.ErrorCode_UNKNOWN_SERVER_ERROR
	want := []quirev1.ErrorCode{ok, ok, bad, bad, bad, notHeld, notHeld, bad, other, ok}
	for i, rr := range res.Ranges {
		if rr.Range != acks[i] || rr.Error.GetCode() != want[i] {
			t.Errorf("range %d (%v): answered %v, want %v", i, acks[i], rr.Error, want[i])
		}
	}
	if len(core.acked) != 2 || core.acked[0].Topic != "a" || core.acked[1].Topic != "b" {
		t.Fatalf("the core was sent %+v, want a-0 then b-0", core.acked)
	}
	gotA := core.acked[0].Acks
	wantA := []request.ShareAck{{First: 10, Last: 11, Type: request.ShareAccept}, {First: 12, Last: 12, Type: request.ShareRelease},
		{First: 13, Last: 14, Type: request.ShareRenew}}
	if !slices.Equal(gotA, wantA) {
		t.Errorf("a-0 acknowledged %+v, want %+v", gotA, wantA)
	}
	var heldA []int64
	for o := range s.held[partKey{"a", 0}] {
		heldA = append(heldA, o)
	}
	slices.Sort(heldA)
	if !slices.Equal(heldA, []int64{13, 14}) || len(s.held[partKey{"b", 0}]) != 2 || s.nHeld != 4 {
		t.Errorf("held a-0 %v, b-0 %d records, %d in all; want 13-14, 2, 4", heldA, len(s.held[partKey{"b", 0}]), s.nHeld)
	}
}

// TestServeSharedKeyOrderedRefused: a key-ordered stream whose fetch a
// leader refuses INVALID_REQUEST (the group serves without key
// ordering) ends with that refusal rather than retrying for ever; a
// stream not asking for key ordering leaves the partition for a while.
func TestServeSharedKeyOrderedRefused(t *testing.T) {
	t.Parallel()
	for _, keyOrdered := range []bool{true, false} {
		st := &quirev1.SubscribeStart{Group: "g", Subscription: &quirev1.GroupSubscription{Topics: []string{"a"}}, Mode: quirev1.SubscribeMode_SHARED, KeyOrdered: keyOrdered}
		s, err := newSharedStream(&shareCoreFake{}, shareCodes{newFakeBroker()}, newFakeStream(context.Background()), st)
		if err != nil {
			t.Fatal(err)
		}
		s.ctx, s.lockFor = context.Background(), time.Minute
		s.parts = []partKey{{"a", 0}}
		refused := fmt.Errorf("%w: share group \"g\" has share.key.ordering=false", ErrInvalidRequest)
		err = s.onFetch(sharedFetched{at: time.Now(), results: []request.ShareFetchResult{{Topic: "a", Partition: 0, Err: refused}}})
		if keyOrdered && (err == nil || !strings.Contains(err.Error(), "share.key.ordering=false")) {
			t.Fatalf("key-ordered stream refused by a leader: %v, want the stream ended with the refusal", err)
		}
		if !keyOrdered && err != nil {
			t.Fatalf("a stream not asking for key ordering ended: %v", err)
		}
	}
}
