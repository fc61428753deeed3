package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// secureClient connects to every node of c over mutual TLS as the
// certificate name (issued by sec), with extra options.
func secureClient(t *testing.T, ctx context.Context, c *testcluster.Cluster, sec *testcluster.Security, name string, opts ...client.Opt) *client.Client {
	t.Helper()
	f := sec.Files(name, false)
	tlsOpt, err := client.TLSFiles(f.CA, f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	var seeds []string
	for _, id := range c.IDs() {
		seeds = append(seeds, c.Addr(id))
	}
	cl, err := client.New(ctx, append([]client.Opt{client.SeedBrokers(seeds...), tlsOpt, client.RetryBackoff(20 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("connect as %s: %v", name, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestClusterSecureReplicationFailoverAndReadOnlyGroup(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 3, testcluster.TLS(sec), testcluster.Authorizer())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c.WaitMetadataVersion(ctx, metadata.MetadataVersionSecurity)
	// Node 1's certificate is a super user: it sets up users and ACLs.
	root := secureClient(t, ctx, c, sec, testcluster.NodeName(1))
	if _, err := root.CreateTopic(ctx, client.TopicSpec{Name: "events", Partitions: 3, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := root.UpsertUser(ctx, "writer", "writer-pw", 0); err != nil {
		t.Fatal(err)
	}
	const reader = "User:CN=reader,O=quire"
	if err := root.CreateACLs(ctx,
		client.ACL{Principal: "User:writer", Permission: "Allow", Operation: "Write", ResourceType: "Topic", ResourceName: "events"},
		client.ACL{Principal: reader, Permission: "Allow", Operation: "Read", ResourceType: "Topic", ResourceName: "events"},
		client.ACL{Principal: reader, Permission: "Allow", Operation: "Read", ResourceType: "Group", ResourceName: "readers"},
	); err != nil {
		t.Fatal(err)
	}
	// Each node checks calls against its own image, which takes the user
	// and the ACLs a moment after the node that answered (docs/security.md):
	// the writer and the reader are other clients, to other nodes.
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		if _, ok := img.UserCredential("writer"); !ok {
			return false
		}
		n := 0
		for _, a := range img.ACLs() {
			if a.Principal == "User:writer" || a.Principal == reader {
				n++
			}
		}
		return n == 3
	})

	// The writer authenticates by password (its certificate is that of a
	// machine with no ACLs).
	writer := secureClient(t, ctx, c, sec, "writer-host", client.SCRAM("writer", "writer-pw"))
	if p, by, err := writer.WhoAmI(ctx); err != nil || p != "User:writer" || by != "scram" {
		t.Fatalf("writer is %q by %q: %v", p, by, err)
	}
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if err := writer.ProduceSync(ctx, &client.Record{Topic: "events", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))}); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 30)

	// Fail over: kill the leader of partition 0; the writer goes on.
	leader, _ := c.WaitLeader(ctx, "events", 0)
	c.Kill(leader)
	produce(30, 30)
	c.Restart(leader)

	// The reader consumes everything as a group member...
	rd := secureClient(t, ctx, c, sec, "reader")
	g, err := rd.NewGroupConsumer(client.GroupConfig{Group: "readers", Topics: []string{"events"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 60 && ctx.Err() == nil {
		recs, err := g.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, r := range recs {
			seen[string(r.Value)] = true
		}
	}
	if len(seen) != 60 {
		t.Fatalf("the reader saw %d distinct records, want 60", len(seen))
	}
	if err := g.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// ...and may neither produce nor delete: with Write on no topic, its
	// idempotent producer gets no producer id (as Kafka's).
	err = rd.ProduceSync(ctx, &client.Record{Topic: "events", Value: []byte("no")})
	if client.ErrorCode(err) != quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("reader produce: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if err := rd.DeleteTopic(ctx, "events"); client.ErrorCode(err) != quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("reader delete: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := rd.CreateACLs(ctx, client.ACL{Principal: reader, Permission: "Allow", Operation: "All", ResourceType: "Cluster"}); client.ErrorCode(err) != quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("reader grants itself: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}
