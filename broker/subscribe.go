package broker

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/subscribe"
)

// subscribeBroker is what a Subscribe stream uses of the broker besides
// the core.
type subscribeBroker struct {
	b       *Broker
	streams *subscribe.Streams
}

var _ subscribe.Broker = subscribeBroker{}

func newSubscribeBroker(b *Broker) subscribeBroker {
	return subscribeBroker{b: b, streams: subscribe.NewStreams()}
}

func (subscribeBroker) ClientHost(ctx context.Context) string { return service.ClientHost(ctx) }
func (subscribeBroker) Status(err error) error                { return service.Status(err) }
func (subscribeBroker) Error(err error) *quirev1.Error        { return service.ErrorOf(err) }
func (sb subscribeBroker) Closing() <-chan struct{}           { return sb.b.stop }
func (subscribeBroker) ShuttingDown() error                   { return ErrShuttingDown }
func (sb subscribeBroker) Logger() hclog.Logger               { return sb.b.logger }
func (sb subscribeBroker) Streams() *subscribe.Streams        { return sb.streams }

func (sb subscribeBroker) GroupChanges() (<-chan struct{}, func()) {
	return sb.b.cluster.node.Subscribe()
}

func (sb subscribeBroker) Member(groupID, member string) (subscribe.MemberView, bool) {
	v, ok := sb.b.cluster.node.Image().GroupMember(groupID, member)
	if !ok {
		return subscribe.MemberView{}, false
	}
	out := subscribe.MemberView{GroupEpoch: v.GroupEpoch, Epoch: v.Epoch}
	for _, tp := range v.Target {
		out.Target = append(out.Target, request.GroupPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	for _, tp := range v.Held {
		out.Held = append(out.Held, request.GroupPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return out, true
}

func (subscribeBroker) TakenOver(groupID, member string) error {
	return fmt.Errorf("%w: member %q of group %q was taken over by another stream", group.ErrFencedMemberEpoch, member, groupID)
}
