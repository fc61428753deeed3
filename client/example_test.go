package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quirelog/quire/client"
)

func Example() {
	ctx := context.Background()
	cl, err := client.New(ctx, client.SeedBrokers(exampleAddr), client.RequiredAcks(client.AllISRAcks))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()

	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "example-orders", Partitions: 3}); err != nil {
		fmt.Println(err)
		return
	}
	// Records with a key go where Kafka's Java client would put them.
	r := client.KeyStringRecord("example-orders", "foobar", "paid")
	if err := cl.ProduceSync(ctx, r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("partition", r.Partition, "offset", r.Offset)

	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"example-orders": {r.Partition: client.AtStart()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cons.Close()
	recs, err := cons.Poll(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s=%s\n", recs[0].Key, recs[0].Value)
	// Output:
	// partition 0 offset 0
	// foobar=paid
}

// A custom partitioner is any Partitioner; PartitionerFunc adapts a
// function. This one sends every record to the last partition.
func ExampleRecordPartitioner() {
	ctx := context.Background()
	last := client.PartitionerFunc(func(_ *client.Record, n int32) int32 { return n - 1 })
	cl, err := client.New(ctx, client.SeedBrokers(exampleAddr), client.RecordPartitioner(last))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "example-last", Partitions: 4}); err != nil {
		fmt.Println(err)
		return
	}
	r := client.StringRecord("example-last", "hello")
	if err := cl.ProduceSync(ctx, r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("partition", r.Partition)
	// Output: partition 3
}

func ExampleClient_Produce() {
	ctx := context.Background()
	cl, err := client.New(ctx, client.SeedBrokers(exampleAddr), client.Linger(10*time.Millisecond),
		client.AllowAutoTopicCreation())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "example-async", Partitions: 1}); err != nil {
		fmt.Println(err)
		return
	}
	offsets := make(chan int64, 3)
	for _, v := range []string{"a", "b", "c"} {
		cl.Produce(ctx, client.StringRecord("example-async", v), func(r *client.Record, err error) {
			if err != nil {
				fmt.Println(err)
			}
			offsets <- r.Offset
		})
	}
	if err := cl.Flush(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-offsets, <-offsets, <-offsets)
	// Output: 0 1 2
}
