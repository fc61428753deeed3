package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/replica/replicagrpc"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/storage"
)

// serveReplicas serves b's ReplicaService on a loopback port, as the
// broker does (the pooled ReplicaFetch, the services' codec), and returns a
// follower's fetch session with it.
func serveReplicas(t *testing.T, b *Broker) replica.FetchSession {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(service.TransportOptions()...)
	s.RegisterService(replicagrpc.WithPooledFetch(&pb.ReplicaService_ServiceDesc), &replicaService{b: b})
	go func() { _ = s.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close(); s.Stop() })
	sess := replicaWire.OpenSession(1, func() (string, bool) { return lis.Addr().String(), true },
		func(string) (*grpc.ClientConn, error) { return cc, nil },
		func(ctx context.Context, _ int32, req *replica.FetchRequest) (*replica.FetchResponse, error) {
			return replicaWire.Fetch(ctx, cc, req)
		})
	t.Cleanup(sess.Close)
	return sess
}

func fetchAt(offset int64) *replica.FetchRequest {
	return &replica.FetchRequest{ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1,
		Partitions: []replica.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: offset}}}
}

// noRegistrations knows no broker: every fetch comes from a stale
// incarnation.
type noRegistrations struct{}

func (noRegistrations) Registration(int32) (replica.Registration, bool) {
	return replica.Registration{}, false
}

type noLogs struct{}

func (noLogs) GetOrCreate(string, int32, storage.LogConfig) (*storage.Log, error) {
	return nil, errors.New("no logs")
}
func (noLogs) Delete(string, int32) error { return nil }
func (noLogs) Logs() []*storage.Log       { return nil }

type noController struct{}

func (noController) AlterPartition(context.Context, string, int32, replica.Assignment) (replica.Assignment, error) {
	return replica.Assignment{}, errors.New("no controller")
}

type noPeers struct{}

func (noPeers) ReplicaFetch(context.Context, int32, *replica.FetchRequest) (*replica.FetchResponse, error) {
	return nil, errors.New("no peers")
}

func newIdleReplicas(t *testing.T) *replica.Manager {
	t.Helper()
	rm, err := replica.New(replica.Config{NodeID: 1, Logs: noLogs{}, Controller: noController{}, Brokers: noRegistrations{},
		Peers: noPeers{}, Fetch: replica.FetchConfig{MaxWait: time.Second, Backoff: time.Second}, MaxFetchResponseBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rm.Stop)
	return rm
}

// A leader's stream keeps answering fetches from the start of its
// shutdown (the controlled shutdown, while it still leads and its
// followers' fetches move the HW) until its server drains; only then does
// it end each stream at its next fetch.
func TestReplicaFetchStreamServesUntilTheDrain(t *testing.T) {
	t.Parallel()
	rm := newIdleReplicas(t)
	b := &Broker{rm: rm, stop: make(chan struct{}), draining: make(chan struct{})}
	sess := serveReplicas(t, b)
	fetch := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := sess.Fetch(ctx, fetchAt(0))
		return err
	}
	// Broker 2 is not registered here: the leader answers that, which
	// shows that the fetch reached HandleFetch.
	close(b.stop)
	if err := fetch(); err == nil || status.Code(err) == codes.Unavailable || !strings.Contains(err.Error(), "registered incarnation") {
		t.Fatalf("fetch once shutdown began: %v, want HandleFetch's answer (not from its registered incarnation)", err)
	}
	close(b.draining)
	if err := fetch(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), ErrShuttingDown.Error()) {
		t.Fatalf("fetch once the server drains: %v, want Unavailable: %v", err, ErrShuttingDown)
	}
}

// Each fetch over the stream counts as a ReplicaFetch call in the
// request metrics, with its own code, as over the unary call.
func TestReplicaFetchStreamCountsEachFetch(t *testing.T) {
	t.Parallel()
	rm := newIdleReplicas(t)
	b := &Broker{rm: rm, stop: make(chan struct{}), draining: make(chan struct{}), rpcStats: rpcstats.New(),
		cfg: Config{MetricsRequestsEnable: true}}
	sess := serveReplicas(t, b)
	var codesSeen []codes.Code
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := sess.Fetch(ctx, fetchAt(0))
		cancel()
		codesSeen = append(codesSeen, status.Code(err))
	}
	var fetch *rpcstats.Method
	for _, m := range b.rpcStats.Snapshot() {
		if m.Name == pb.ReplicaService_ReplicaFetch_FullMethodName {
			fetch = &m
		}
	}
	if fetch == nil || fetch.Stream {
		t.Fatalf("no unary ReplicaFetch in the request stats after 3 fetches over the stream: %+v", b.rpcStats.Snapshot())
	}
	// Broker 2 is not registered: each fetch is answered with an error.
	want := codesSeen[0]
	if want == codes.OK || codesSeen[1] != want || codesSeen[2] != want {
		t.Fatalf("fetches answered %v, want one error code three times", codesSeen)
	}
	if got := fetch.ByCode[want]; got != 3 || len(fetch.ByCode) != 1 {
		t.Fatalf("ReplicaFetch counted %v, want 3 × %v", fetch.ByCode, want)
	}
	if fetch.Latency.Count != 3 {
		t.Fatalf("ReplicaFetch latency counted %d fetches, want 3", fetch.Latency.Count)
	}
}

// TestLeadershipCodesCoverEveryRefusal: each of replica's leadership
// refusals has a code of its own, so a follower told one over the wire
// (through the error table and replicaWire) recognises it as what it is.
func TestLeadershipCodesCoverEveryRefusal(t *testing.T) {
	t.Parallel()
	for _, want := range replica.LeadershipRefusals {
		resp := &replica.FetchResponse{Partitions: []replica.FetchResult{{Topic: "t", Err: fmt.Errorf("%w: t-0", want)}}}
		msg := replicaWire.ResponseToPB(resp)
		if code := quirev1.ErrorCode(msg.Partitions[0].ErrorCode); code == quirev1.ErrorCode_UNKNOWN_SERVER_ERROR {
			t.Errorf("%v has no row in the error table", want)
		}
		got := replicaWire.ResponseFromPB(msg).Partitions[0].Err
		for _, other := range replica.LeadershipRefusals {
			if errors.Is(got, other) != (other == want) {
				t.Errorf("%v reaches the follower as %v: errors.Is(%v) is %v", want, got, other, errors.Is(got, other))
			}
		}
	}
}
