// Package client is the Go client of Quire: a producer, a partition
// consumer, consumer group offsets and the admin calls, over Quire's gRPC
// API, in the spirit of franz-go's kgo for Kafka.
//
// # A short tour
//
// A Client is made with functional options and is safe for concurrent use.
// It fetches the cluster's metadata, keeps one gRPC connection per broker,
// sends each partition's requests to its leader, refreshes its metadata when
// a broker answers NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION or
// LEADER_NOT_AVAILABLE, and retries retriable errors with backoff. The
// metadata's answer that a topic does not exist is final once brokers
// have given it for a second (a topic just created may not be in every
// broker's metadata yet): producing to it fails then (a broker allowed to
// create it would have; see AllowAutoTopicCreation and EnsureTopic). A
// producer's batches follow
// each topic's max.message.bytes unless BatchMaxBytes is set.
//
//	cl, err := client.New(ctx,
//		client.SeedBrokers("127.0.0.1:9092"),
//		client.RequiredAcks(client.AllISRAcks),
//		client.Linger(5*time.Millisecond),
//	)
//	if err != nil { ... }
//	defer cl.Close()
//
// Producing is asynchronous: Produce buffers the record in its partition's
// batch and calls back once the batch is acknowledged. Records with a key
// land where Kafka's Java client would put them (murmur2 of the key);
// keyless records stick to one partition per batch. A partition has up to
// MaxInFlightPerPartition requests in flight (5 with idempotence, 1
// without), sent in order over a pipelined ProduceStream per broker, which
// appends them in the order they arrive; records of a partition are called
// back in the order produced. Batches of many partitions travel together
// in one request.
//
//	cl.Produce(ctx, client.KeyStringRecord("orders", "customer-42", "paid"),
//		func(r *client.Record, err error) {
//			if err != nil { log.Print(err); return }
//			fmt.Println("at", r.Partition, r.Offset)
//		})
//	err = cl.Flush(ctx) // everything acknowledged or failed
//
// ProduceSync does the same and waits. MaxBufferedBytes bounds what may
// wait; when full, Produce blocks or fails with ErrBufferFull
// (BlockOnBufferFull). DeliveryTimeout bounds retries.
//
// The producer is idempotent by default (Kafka's enable.idempotence): it
// gets a producer id from InitProducerId, numbers each partition's records,
// and resends a retried batch byte for byte, so a retry after a timeout or
// a leader change never writes a record twice: the broker answers it with
// the first write's offsets. When one of a partition's requests in flight
// fails, the ones behind it are refused as out of order (the broker misses
// the failed batches); the producer sends them all again, in order, with
// the same sequences, and the application sees no error. An
// OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID with nothing
// unsettled ahead (the broker lost the producer's state; batches not
// written) is handled by moving to the producer's next epoch and numbering
// again from 0 (KIP-360). A batch
// sent but unanswered when its DeliveryTimeout passes fails with
// ErrUnknownOutcome: it may or may not be in the log, and it is not sent
// again; so does one whose retry after an unanswered attempt is refused
// for good. Idempotence needs acks=all; Idempotent(false) turns it off.
//
// A request unanswered for a second makes the producer look at the
// metadata again (at most once a second per broker). A partition whose
// leader was replaced meanwhile gives up every request still waiting on
// the old leader (paused or cut off, it may never answer) and sends their
// batches again to the new one, in order, with the same sequences (an
// unknown outcome without idempotence, below); a late answer from the
// old leader is then ignored.
//
// Without idempotence a retry of a batch the broker may have written is
// not recognised, and could write it twice. So an attempt that ends with
// its outcome unknown (sent, then the stream broke, the request timed
// out or the partition moved to a new leader before an answer; or
// answered with Error.OutcomeUnknown: appended by a leader that could
// not see it committed) fails its records with
// ErrUnknownOutcome at once, wrapping the attempt's error; errors the
// broker gives before appending (NOT_LEADER_OR_FOLLOWER without the flag,
// NOT_ENOUGH_REPLICAS, ...) are retried as usual. RetryUnknownOutcome(true)
// retries those too, as Kafka's producer without idempotence does
// (records at least once, maybe twice).
//
// Consuming reads chosen partitions from a start position: AtStart, AtEnd,
// At(offset) or AtTimestamp(t). The consumer finds each partition's leader
// and follows it when it moves; one long-poll loop per broker keeps the next
// fetch in flight while the caller handles the current records.
//
//	cons, _ := cl.NewConsumer(map[string]map[int32]client.Offset{
//		"orders": {0: client.AtStart(), 1: client.At(1200)},
//	})
//	defer cons.Close()
//	for {
//		recs, err := cons.Poll(ctx)
//		...
//	}
//
// Poll returns a new Record per record; PollFunc instead calls a function
// with each, reusing one Record (its Key, Value and Headers stay valid),
// for consumers that do not keep records and want no allocation per
// record.
//
// A GroupConsumer is a member of a consumer group: the cluster assigns
// it partitions and moves them as members come and go, never giving one
// partition to two members at once:
//
//	g, _ := cl.NewGroupConsumer(client.GroupConfig{Group: "billing", Topics: []string{"orders"}})
//	defer g.Close(ctx)
//	for {
//		recs, err := g.Poll(ctx)
//		...
//	}
//
// GroupConsumer.PollFunc is its allocation-free form, as for the partition
// consumer. Its function runs without the member's lock, and a partition
// taken from the member is given up (OnRevoked, the commit of its
// position, the heartbeat that releases it) only once the call in
// progress has returned; no record of it reaches the function after that:
//
//	n, err := g.PollFunc(ctx, func(r *client.Record) { handle(r.Key, r.Value) })
//
// It commits positions on an interval, on revocation and on Close, and
// on demand with Commit or CommitAsync; Pause and Resume stop and restart
// partitions without giving them up; Seek moves one; Reset NoReset makes
// a partition the group never committed an ErrNoCommittedOffset from Poll,
// and a position out of range an OFFSET_OUT_OF_RANGE error naming the
// partition, the offset and the valid range, never a silent restart
// elsewhere (Kafka's auto.offset.reset=none). GroupConfig.InstanceID makes
// the member static (Kafka's group.instance.id): a process restarted
// within the session timeout takes its partitions back without moving
// anyone else's.
//
// Without members (what Kafka calls a simple consumer group: the
// application picks the partitions) CommitOffsets stores the next offset
// to read per partition; AtCommitted starts a partition there, or at a
// fallback where the group committed nothing:
//
//	cons, _ := cl.NewConsumer(map[string]map[int32]client.Offset{
//		"orders": {0: client.AtCommitted("billing", client.AtStart())},
//	})
//	...
//	err = cl.CommitOffsets(ctx, "billing", client.OffsetCommit{
//		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset + 1, LeaderEpoch: r.LeaderEpoch})
//
// FetchOffsets, ListGroups and DeleteGroup read and remove them;
// ResetOffsets moves those of a group with no members.
//
// Admin calls create, delete, list and describe topics, describe and alter
// their configs, add partitions, and describe the cluster:
//
//	_, err = cl.CreateTopic(ctx, client.TopicSpec{Name: "orders", Partitions: 6})
//
// Errors a broker returns are *Error values carrying the Kafka-style code
// (quire.v1.ErrorCode), the broker's message and whether a retry may work.
package client
