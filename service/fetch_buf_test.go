package service

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/fetchbuf"
)

// holdingConsumer is a Consumer whose Fetch leaves a pooledFetch in the
// call's hold, as consumerService.Fetch does, and answers with answer
// (its message when nil) and err.
type holdingConsumer struct {
	quirev1.UnimplementedConsumerServer
	msg    *pooledFetch
	answer *quirev1.FetchResponse
	err    error
}

func (c *holdingConsumer) Fetch(ctx context.Context, _ *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	hold := unaryFetchHold(ctx)
	if hold == nil {
		return nil, errors.New("no hold in the call's context")
	}
	hold.keep(c.msg)
	if c.err != nil {
		return nil, c.err
	}
	if c.answer != nil {
		return c.answer, nil
	}
	return c.msg.resp, nil
}

// withPooledFetch's Fetch handler answers the pooledFetch the method
// left (so the codec sends from its buffers) when the method answered
// its message, and otherwise gives the buffers back and answers what the
// method did.
func TestWithPooledFetchAnswersTheHeldMessage(t *testing.T) {
	t.Parallel()
	sd := withPooledFetch(&quirev1.Consumer_ServiceDesc)
	var h func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error)
	for _, m := range sd.Methods {
		if m.MethodName == "Fetch" {
			h = m.Handler
		}
	}
	if h == nil {
		t.Fatal("no Fetch method")
	}
	dec := func(any) error { return nil }
	newMsg := func() *pooledFetch {
		return &pooledFetch{resp: &quirev1.FetchResponse{}, bufs: []*[]byte{fetchbuf.Get(10), nil}}
	}

	srv := &holdingConsumer{msg: newMsg()}
	got, err := h(srv, context.Background(), dec, nil)
	if err != nil || got != any(srv.msg) {
		t.Fatalf("answered %T %v, want the held *pooledFetch", got, err)
	}
	if srv.msg.bufs[0] == nil {
		t.Fatal("the answer's buffer was given back before it was sent")
	}

	fail := errors.New("refused")
	srv = &holdingConsumer{msg: newMsg(), err: fail}
	got, err = h(srv, context.Background(), dec, nil)
	if !errors.Is(err, fail) || got != (*quirev1.FetchResponse)(nil) {
		t.Fatalf("answered %v %v, want the method's error", got, err)
	}
	if srv.msg.bufs[0] != nil {
		t.Fatal("a failed call kept its buffer")
	}

	other := &quirev1.FetchResponse{}
	srv = &holdingConsumer{msg: newMsg(), answer: other}
	got, err = h(srv, context.Background(), dec, nil)
	if err != nil || got != any(other) {
		t.Fatalf("answered %T %v, want the method's other message", got, err)
	}
	if srv.msg.bufs[0] != nil {
		t.Fatal("a call answering another message kept its buffer")
	}
}

// repeatingConsumer is a Consumer whose every Fetch leaves a new
// pooledFetch in the call's hold and answers its message.
type repeatingConsumer struct {
	quirev1.UnimplementedConsumerServer
	msgs []*pooledFetch
}

func (c *repeatingConsumer) Fetch(ctx context.Context, _ *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	msg := &pooledFetch{resp: &quirev1.FetchResponse{}, bufs: []*[]byte{fetchbuf.Get(10)}}
	c.msgs = append(c.msgs, msg)
	unaryFetchHold(ctx).keep(msg)
	return msg.resp, nil
}

// An interceptor that calls the method twice and answers the first
// message: that message is sent from its buffers, which stay out of the
// pool until gRPC writes it; only the second call's go back.
func TestWithPooledFetchInterceptorCallingTwice(t *testing.T) {
	t.Parallel()
	sd := withPooledFetch(&quirev1.Consumer_ServiceDesc)
	var h func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error)
	for _, m := range sd.Methods {
		if m.MethodName == "Fetch" {
			h = m.Handler
		}
	}
	twice := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		first, err := handler(ctx, req)
		if err != nil {
			return nil, err
		}
		if _, err := handler(ctx, req); err != nil {
			return nil, err
		}
		return first, nil
	}
	srv := &repeatingConsumer{}
	got, err := h(srv, context.Background(), func(any) error { return nil }, twice)
	if err != nil || len(srv.msgs) != 2 {
		t.Fatalf("answered %T %v after %d calls", got, err, len(srv.msgs))
	}
	if got != any(srv.msgs[0]) {
		t.Fatalf("answered %T, want the first call's *pooledFetch", got)
	}
	if srv.msgs[0].bufs[0] == nil {
		t.Fatal("the answer's buffer was given back before it was sent")
	}
	if srv.msgs[1].bufs[0] != nil {
		t.Fatal("the unanswered call kept its buffer")
	}
}

// A partition's records that are not the whole of its pooled buffer (the
// response changed after the read) are encoded as they are, and the
// buffer is handed over once: a later release does not give it back.
func TestPooledFetchBufferSendsTheRecords(t *testing.T) {
	t.Parallel()
	buf := fetchbuf.Get(10 << 10)
	*buf = (*buf)[:10<<10]
	for i := range *buf {
		(*buf)[i] = byte(i)
	}
	msg := &pooledFetch{resp: &quirev1.FetchResponse{}, bufs: []*[]byte{buf}}
	records := (*buf)[:6<<10]
	got := msg.Buffer(0, records)
	if got.Len() != len(records) || string(got.ReadOnlyData()) != string(records) {
		t.Fatalf("encoded %d bytes, want the %d of the records", got.Len(), len(records))
	}
	if msg.bufs[0] != nil {
		t.Fatal("the message still holds the buffer it handed over")
	}
	msg.release() // must not give back what gRPC (or nobody) owns now
	got.Free()
}
