package broker

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/subscribe"
)

// Subscribe runs one stream's group member (package subscribe) on this
// broker, over the request core, which authorizes its every call as the
// stream's principal.
func (s *groupService) Subscribe(stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse]) error {
	return subscribe.Serve(coreContext(stream.Context()), s.b.core, subscribeBroker{s.b}, stream)
}

// subscribeBroker is what a Subscribe stream uses of the broker besides
// the core.
type subscribeBroker struct{ b *Broker }

var _ subscribe.Broker = subscribeBroker{}

func (subscribeBroker) ClientHost(ctx context.Context) string { return clientHost(ctx) }
func (subscribeBroker) Status(err error) error                { return toStatus(err) }
func (subscribeBroker) Error(err error) *quirev1.Error        { return toError(err) }
func (sb subscribeBroker) Closing() <-chan struct{}           { return sb.b.stop }
func (subscribeBroker) ShuttingDown() error                   { return ErrShuttingDown }
func (sb subscribeBroker) Logger() hclog.Logger               { return sb.b.logger }
