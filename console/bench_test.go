package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/console"
	"github.com/quirelog/quire/testcluster"
)

// BenchmarkConsolePages1000Topics times the console's pages against one
// node holding 1,000 topics of 6 partitions. "describe-all" is what the
// topic list cost before it was paged (DescribeTopics of every topic):
// the paged list is to be compared with it.
//
//	go test -run '^$' -bench ConsolePages1000Topics -benchtime 20x ./console
func BenchmarkConsolePages1000Topics(b *testing.B) {
	const topics, partitions = 1000, 6
	c := testcluster.New(b, 1, testcluster.Config(func(_ int32, cfg *broker.Config) { cfg.MaxPartitionsPerBroker = 8000 }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c.WaitController(ctx)
	cl, err := client.New(ctx, client.SeedBrokers(c.Addr(1)), client.Linger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, topics)
	for i := range topics {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: fmt.Sprintf("t%04d", i), Partitions: partitions, ReplicationFactor: 1}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var recs []*client.Record
	for i := range 1000 {
		recs = append(recs, &client.Record{Topic: "t0500", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	if err := cl.ProduceSync(ctx, recs...); err != nil {
		b.Fatal(err)
	}
	if err := cl.CommitOffsets(ctx, "g", client.OffsetCommit{Topic: "t0500", Partition: 0, Offset: 1, LeaderEpoch: -1}); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d topics of %d partitions made in %v", topics, partitions, time.Since(start).Round(time.Millisecond))
	con, err := console.New(console.Config{Brokers: []string{c.Addr(1)}, RequestTimeout: 30 * time.Second, SampleInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer con.Close()
	srv := httptest.NewServer(con.Handler())
	defer srv.Close()
	for _, path := range []string{"/", "/topics", "/topics?page=10", "/topics/t0500", "/topics/t0500/messages",
		"/topics/t0500/messages?key=k77&from=oldest", "/topics/t0500/messages/0/3", "/groups", "/groups/g", "/throughput"} {
		b.Run("page="+path, func(b *testing.B) {
			for range b.N {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", path, resp.StatusCode)
				}
				b.SetBytes(n)
			}
		})
	}
	b.Run("describe-all", func(b *testing.B) {
		for range b.N {
			if _, err := cl.DescribeTopics(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
