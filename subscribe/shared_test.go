package subscribe

import (
	"context"
	"errors"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
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
