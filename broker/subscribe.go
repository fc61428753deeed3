package broker

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/subscribe"
)

// subscribeBroker is what a Subscribe stream's member uses of the broker.
type subscribeBroker struct{ b *Broker }

var _ subscribe.Broker = subscribeBroker{}

func (sb subscribeBroker) Heartbeat(ctx context.Context, req *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error) {
	return sb.b.cluster.fwd.ConsumerGroupHeartbeat(ctx, req)
}

func (sb subscribeBroker) CommitOffsets(ctx context.Context, group string, member metadata.GroupMember, offs []metadata.OffsetCommit) error {
	_, err := sb.b.cluster.fwd.CommitOffsets(ctx, group, member, offs, sb.b.clock.Now())
	return err
}

func (sb subscribeBroker) FetchOffsets(ctx context.Context, group string, tps []metadata.TopicPartition) ([]metadata.CommittedOffset, error) {
	return sb.b.cluster.fwd.FetchOffsets(ctx, group, tps)
}

func (sb subscribeBroker) ListOffset(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	return sb.b.listOffsetAnywhere(ctx, topic, partition, ts)
}

func (sb subscribeBroker) Fetch(ctx context.Context, specs []subscribe.Spec, wait time.Duration, maxBytes int) []subscribe.Result {
	in := make([]request.FetchPartition, len(specs))
	for i, sp := range specs {
		in[i] = request.FetchPartition{Topic: sp.Topic, Partition: sp.Partition, Offset: sp.Offset}
	}
	got := sb.b.fetchBatches(ctx, in, wait, maxBytes)
	out := make([]subscribe.Result, len(got))
	for i, r := range got {
		out[i] = subscribe.Result{Spec: subscribe.Spec{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			Batches: r.Records, Err: r.Err, Buf: r.Buf}
	}
	return out
}

func (sb subscribeBroker) AuthorizeRead(ctx context.Context, topic string) error {
	return sb.b.authorizeTopic(ctx, auth.OpRead, topic)
}

func (subscribeBroker) CheckSubscription(sub *quirev1.GroupSubscription) error {
	return service.CheckSubscription(sub)
}
func (subscribeBroker) ClientHost(ctx context.Context) string { return service.ClientHost(ctx) }
func (subscribeBroker) Status(err error) error                { return service.Status(err) }
func (subscribeBroker) Error(err error) *quirev1.Error        { return service.ErrorOf(err) }
func (sb subscribeBroker) Closing() <-chan struct{}           { return sb.b.stop }
func (subscribeBroker) ShuttingDown() error                   { return ErrShuttingDown }
func (sb subscribeBroker) Logger() hclog.Logger               { return sb.b.logger }
