package client_test

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

// lostAnswer is a unary interceptor that lets the first CreateTopic reach
// the broker and be handled, then loses its answer (the connection
// broke: UNAVAILABLE, as when the node timed out just as the controller
// committed); it keeps every CreateTopic request sent.
type lostAnswer struct {
	mu   sync.Mutex
	sent []*quirev1.CreateTopicRequest
}

func (l *lostAnswer) opt() client.Opt {
	return client.DialOptions(grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method != quirev1.Admin_CreateTopic_FullMethodName {
				return invoker(ctx, method, req, reply, cc, opts...)
			}
			l.mu.Lock()
			l.sent = append(l.sent, proto.Clone(req.(*quirev1.CreateTopicRequest)).(*quirev1.CreateTopicRequest))
			first := len(l.sent) == 1
			l.mu.Unlock()
			err := invoker(ctx, method, req, reply, cc, opts...)
			if first && err == nil {
				return status.Error(codes.Unavailable, "connection reset after the request was handled")
			}
			return err
		}))
}

func (l *lostAnswer) requests() []*quirev1.CreateTopicRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*quirev1.CreateTopicRequest(nil), l.sent...)
}

// TestClientCreateTopicRetryAfterLostAnswer: a CreateTopic whose first
// attempt created the topic but whose answer was lost is retried with the
// same request id and answered with the topic that attempt created, not
// TOPIC_ALREADY_EXISTS; a later CreateTopic of the same name, a new call
// with its own request id, still is TOPIC_ALREADY_EXISTS.
func TestClientCreateTopicRetryAfterLostAnswer(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	// Request ids are kept from the level the node raises to on its own.
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionCreateRequestID)
	var lost lostAnswer
	cl := newClient(t, b.Addr(), lost.opt())
	ctx := testCtx(t)

	d, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "lost-answer", Partitions: 2})
	if err != nil {
		t.Fatalf("create whose first answer was lost: %v", err)
	}
	sent := lost.requests()
	if len(sent) != 2 {
		t.Fatalf("%d CreateTopic attempts, want 2 (the lost one and its retry)", len(sent))
	}
	rid := sent[0].GetRequestId()
	if rid == "" || sent[1].GetRequestId() != rid {
		t.Fatalf("attempts carried request ids %q and %q, want one for both", rid, sent[1].GetRequestId())
	}
	if d.Name != "lost-answer" || d.ID == "" || d.ID == rid || len(d.Partitions) != 2 {
		t.Fatalf("answered %+v, want topic lost-answer with an id of the node's and 2 partitions", d)
	}
	ds, err := cl.DescribeTopics(ctx, "lost-answer")
	if err != nil || len(ds) != 1 || ds[0].ID != d.ID {
		t.Fatalf("describe: %+v, %v; want the topic with id %s", ds, err, d.ID)
	}

	_, err = cl.CreateTopic(ctx, client.TopicSpec{Name: "lost-answer", Partitions: 2})
	if client.ErrorCode(err) != quirev1.ErrorCode_TOPIC_ALREADY_EXISTS {
		t.Fatalf("a second CreateTopic: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if sent := lost.requests(); len(sent) != 3 || sent[2].GetRequestId() == rid || sent[2].GetRequestId() == "" {
		t.Fatalf("the second CreateTopic sent %v, want a fresh request id", sent[len(sent)-1])
	}
}
