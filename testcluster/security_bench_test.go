package testcluster_test

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// BenchmarkSecurityProduce is benchReplicated's acks=all produce (batches
// of 1000 x 100-byte records, 4 goroutines, replication factor 3) on a
// plain cluster, one with mutual TLS between every node and client, and
// one with TLS and the authorizer, producing as a principal with an ACL
// (not a super user, so every request is checked).
func BenchmarkSecurityProduce(b *testing.B) {
	b.Run("plaintext", func(b *testing.B) {
		c := testcluster.New(b, 3)
		benchSecureProduce(b, c, c.Conn)
	})
	b.Run("tls", func(b *testing.B) {
		sec := testcluster.NewSecurity(b)
		c := testcluster.New(b, 3, testcluster.TLS(sec))
		benchSecureProduce(b, c, c.Conn)
	})
	b.Run("tls+acls", func(b *testing.B) {
		sec := testcluster.NewSecurity(b)
		c := testcluster.New(b, 3, testcluster.TLS(sec), testcluster.Authorizer())
		c.WaitMetadataVersion(context.Background(), metadata.MetadataVersionSecurity)
		if _, err := quirev1.NewSecurityClient(c.Conn(1)).CreateAcls(context.Background(), &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{
			acl("User:CN=writer,O=quire", "Allow", "Write", "Topic", "bench", "Literal"),
		}}); err != nil {
			b.Fatal(err)
		}
		conns := map[int32]*grpc.ClientConn{}
		benchSecureProduce(b, c, func(id int32) *grpc.ClientConn {
			if conns[id] == nil {
				cc, err := grpc.NewClient(c.Addr(id), sec.ClientCredentials("writer"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cc.Close() })
				conns[id] = cc
			}
			return conns[id]
		})
	})
}

func benchSecureProduce(b *testing.B, c *testcluster.Cluster, conn func(int32) *grpc.ClientConn) {
	ctx := context.Background()
	if _, err := admin(c, 1).CreateTopic(ctx, &quirev1.CreateTopicRequest{
		Name: "bench", OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 1}, OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 3},
		Configs: map[string]string{"min.insync.replicas": "2"},
	}); err != nil {
		b.Fatal(err)
	}
	leader, _ := c.WaitLeader(ctx, "bench", 0)
	const workers, records = 4, 1000
	bld := record.NewBuilder(record.None)
	value := make([]byte, 100)
	for range records {
		bld.Append(1, nil, value, nil)
	}
	batch := bld.Build()
	pr := quirev1.NewProducerClient(conn(leader))
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	var next sync.Mutex
	n := b.N
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			own := append([]byte(nil), batch...)
			for {
				next.Lock()
				if n == 0 {
					next.Unlock()
					return
				}
				n--
				next.Unlock()
				// The in-process cluster's short session timeout can
				// lapse on a loaded machine: a retriable refusal is sent
				// again (a few times), as a client would.
				for attempt := 0; ; attempt++ {
					resp, err := pr.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1}, TimeoutMs: 10000,
						Partitions: []*quirev1.PartitionRecords{{Topic: "bench", Records: own}}})
					if err != nil {
						b.Error(err)
						return
					}
					e := resp.Partitions[0].Error
					if e == nil {
						break
					}
					if !e.Retriable || attempt == 20 {
						b.Error(e.Message)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
}
