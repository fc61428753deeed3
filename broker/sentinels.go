package broker

import (
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// Errors of the node. The error table that turns them, and every
// sentinel of the module, into statuses and codes is service/errors.go.
var (
	ErrInvalidConfig      = request.ErrInvalidConfig
	ErrInvalidRequest     = replica.ErrInvalidRequest
	ErrLeaderNotAvailable = replica.ErrLeaderNotAvailable
	ErrBrokersNotReady    = request.ErrBrokersNotReady
	ErrRequestTimedOut    = replica.ErrRequestTimedOut
	ErrShuttingDown       = service.ErrShuttingDown
)
