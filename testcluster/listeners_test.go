package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/testcluster"
)

// twoListenerCluster starts n nodes that each listen on INTERNAL (the
// harness's address, inter-broker) and on EXTERNAL (another free port, which
// advertises its bound address), and returns every node's EXTERNAL address.
func twoListenerCluster(t *testing.T, n int) (*testcluster.Cluster, map[int32]string) {
	t.Helper()
	c := testcluster.New(t, n, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.ListenAddr = "INTERNAL://" + cfg.ListenAddr + ",EXTERNAL://127.0.0.1:0"
		cfg.AdvertisedAddr = "INTERNAL://" + cfg.AdvertisedAddr
		cfg.InterBrokerListenerName = "INTERNAL"
	}))
	ext := map[int32]string{}
	for _, id := range c.IDs() {
		addr, ok := c.Node(id).ListenerAddr("EXTERNAL")
		if !ok || addr == c.Addr(id) {
			t.Fatalf("node %d: EXTERNAL listener %q (ok %v), INTERNAL %s", id, addr, ok, c.Addr(id))
		}
		ext[id] = addr
	}
	return c, ext
}

func dialT(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestClusterListenersHandOutTheConnectedListenersAddresses: a client that
// reached a node on its EXTERNAL listener gets every broker's EXTERNAL
// address in GetMetadata and DescribeCluster; one on INTERNAL gets the
// INTERNAL ones, which are also the registered inter-broker addresses.
func TestClusterListenersHandOutTheConnectedListenersAddresses(t *testing.T) {
	t.Parallel()
	c, ext := twoListenerCluster(t, 3)
	ctx := testCtx(t)
	for _, via := range c.IDs() {
		for _, tc := range []struct {
			listener string
			cc       *grpc.ClientConn
			want     func(id int32) string
		}{
			{"EXTERNAL", dialT(t, ext[via]), func(id int32) string { return ext[id] }},
			{"INTERNAL", c.Conn(via), c.Addr},
		} {
			md, err := quirev1.NewMetadataClient(tc.cc).GetMetadata(ctx, &quirev1.GetMetadataRequest{})
			if err != nil {
				t.Fatalf("GetMetadata via node %d %s: %v", via, tc.listener, err)
			}
			if len(md.Brokers) != 3 {
				t.Fatalf("GetMetadata via node %d %s: %d brokers", via, tc.listener, len(md.Brokers))
			}
			for _, b := range md.Brokers {
				if b.Address != tc.want(b.Id) {
					t.Errorf("GetMetadata via node %d %s: broker %d at %s, want %s", via, tc.listener, b.Id, b.Address, tc.want(b.Id))
				}
			}
			dc, err := quirev1.NewAdminClient(tc.cc).DescribeCluster(ctx, &quirev1.DescribeClusterRequest{})
			if err != nil {
				t.Fatalf("DescribeCluster via node %d %s: %v", via, tc.listener, err)
			}
			for _, b := range dc.Brokers {
				if b.Address != tc.want(b.Id) {
					t.Errorf("DescribeCluster via node %d %s: broker %d at %s, want %s", via, tc.listener, b.Id, b.Address, tc.want(b.Id))
				}
			}
		}
	}
	for _, id := range c.IDs() {
		b, _ := c.Image(1).Broker(id)
		if b.Addr != c.Addr(id) || b.AddrFor("EXTERNAL") != ext[id] || b.AddrFor("INTERNAL") != c.Addr(id) {
			t.Errorf("broker %d registered %s with endpoints %+v", id, b.Addr, b.Endpoints)
		}
	}
	if got := c.Node(2).Config().AdvertisedAddr; got != "INTERNAL://"+c.Addr(2)+",EXTERNAL://"+ext[2] {
		t.Errorf("node 2 advertised.listeners after start: %s", got)
	}
}

// TestClusterListenersClientOnExternalListener: a client seeded with one
// node's EXTERNAL address produces with acks=all to every partition
// leader it sends to, dialing EXTERNAL addresses only.
func TestClusterListenersClientOnExternalListener(t *testing.T) {
	t.Parallel()
	c, ext := twoListenerCluster(t, 3)
	ctx := testCtx(t)
	c.WaitController(ctx)
	const topic = "outside"
	createTopic(t, c, 1, topic, 3, 3)
	for p := int32(0); p < 3; p++ {
		c.WaitLeader(ctx, topic, p)
	}
	var mu sync.Mutex
	targets := map[string]bool{}
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		targets[cc.Target()] = true
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	recordStream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		mu.Lock()
		targets[cc.Target()] = true
		mu.Unlock()
		return streamer(ctx, desc, cc, method, opts...)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := client.New(cctx, client.SeedBrokers(ext[1]), client.RequestTimeout(5*time.Second),
		client.DialOptions(grpc.WithChainUnaryInterceptor(record), grpc.WithChainStreamInterceptor(recordStream)))
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	defer cl.Close()
	const n = 30
	var recs []*client.Record
	for i := range n {
		recs = append(recs, &client.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...); err != nil {
		t.Fatalf("produce through EXTERNAL: %v", err)
	}
	mu.Lock()
	var dialed []string
	for addr := range targets {
		dialed = append(dialed, addr)
	}
	mu.Unlock()
	slices.Sort(dialed)
	external := map[string]bool{}
	for _, a := range ext {
		external[a] = true
	}
	leaders := map[string]bool{}
	for _, r := range recs {
		l, _ := c.WaitLeader(ctx, topic, r.Partition)
		leaders[ext[l]] = true
	}
	for _, d := range dialed {
		if !external[strings.TrimPrefix(d, "passthrough:///")] {
			t.Errorf("client dialed %s, not an EXTERNAL address (dialed %v, EXTERNAL %v)", d, dialed, ext)
		}
		delete(leaders, strings.TrimPrefix(d, "passthrough:///"))
	}
	if len(leaders) != 0 {
		t.Errorf("client never dialed the leaders at %v (dialed %v)", leaders, dialed)
	}
}
