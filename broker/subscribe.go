package broker

import (
	"context"

	"github.com/hashicorp/go-hclog"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/subscribe"
)

// subscribeBroker is what a Subscribe stream uses of the broker besides
// the core.
type subscribeBroker struct{ b *Broker }

var _ subscribe.Broker = subscribeBroker{}

func (subscribeBroker) ClientHost(ctx context.Context) string { return service.ClientHost(ctx) }
func (subscribeBroker) Status(err error) error                { return service.Status(err) }
func (subscribeBroker) Error(err error) *quirev1.Error        { return service.ErrorOf(err) }
func (sb subscribeBroker) Closing() <-chan struct{}           { return sb.b.stop }
func (subscribeBroker) ShuttingDown() error                   { return ErrShuttingDown }
func (sb subscribeBroker) Logger() hclog.Logger               { return sb.b.logger }
