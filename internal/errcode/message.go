package errcode

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/errmsg"
)

// Bounds on the text of an error a client receives (internal/errmsg).
const (
	MaxQuoted  = errmsg.MaxQuoted
	MaxMessage = errmsg.MaxMessage
)

// Message returns msg as a client may receive it (errmsg.Message).
func Message(msg string) string { return errmsg.Message(msg) }

// Status is the gRPC status error of a whole failed call: code c, with e
// as its detail and e's message (cut by Message, as e's own is) as the
// status message. Every refusal a client receives is built here, so every
// one fits a client's header limit.
func Status(c codes.Code, e *quirev1.Error) error {
	e.Message = Message(e.Message)
	st := status.New(c, e.Message)
	if d, err := st.WithDetails(e); err == nil {
		st = d
	}
	return st.Err()
}
