package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/nullbroker"
	"github.com/quirelog/quire/record"
)

// The transport's ceiling, for the perf figures to be read against:
// `perf ceiling` sends pre-built requests with no client library over one
// bare gRPC stream, and `perf null-broker` is a server that checks each
// batch's framing and keeps nothing. The ceiling against the null broker
// is what gRPC itself carries on this machine; against a real broker, what
// the broker carries with no client cost; `perf produce` beside them shows
// the client's share.

func perfCeilingCmd(g *globalFlags) *cobra.Command {
	var topic string
	var n int64
	var size, reqBytes, window int
	var acks int32
	cmd := &cobra.Command{
		Use:   "ceiling",
		Short: "Produce pre-built requests over one bare gRPC stream, with no client library: the transport's ceiling",
		Long: `ceiling pipelines pre-built produce requests of --request-bytes (the Go
client's default batch size), holding records of --size bytes, to partition 0
of --topic over one ProduceStream with --window requests in flight, against
the first of --brokers, and reports records/s. Against 'quire perf
null-broker' it measures the gRPC transport alone; against a broker, the
broker without a client's cost. The topic must exist there (the null broker
takes any name).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n < 1 || size < 0 || reqBytes < size+100 || window < 1 {
				return fmt.Errorf("need -n ≥ 1, --size ≥ 0, --request-bytes ≥ size+100 and --window ≥ 1")
			}
			if acks != 0 && acks != 1 && acks != -1 {
				return fmt.Errorf("--acks must be -1, 0 or 1, not %d", acks)
			}
			addr := strings.TrimSpace(strings.Split(g.brokers, ",")[0])
			creds, err := g.tls.credentials()
			if err != nil {
				return err
			}
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
				grpc.WithInitialWindowSize(4<<20), grpc.WithInitialConnWindowSize(16<<20))
			if err != nil {
				return fmt.Errorf("connect to %s: %w", addr, err)
			}
			defer cc.Close()
			ctx, cancel := cmdContext()
			defer cancel()
			bld := record.NewBuilder(record.None)
			value := make([]byte, size)
			ts := time.Now().UnixMilli()
			for bld.EstimatedSize()+size+30 < reqBytes {
				bld.Append(ts, nil, value, nil)
			}
			batch, perReq := bld.Build(), int64(bld.Len())
			reqs := (n + perReq - 1) / perReq
			began := time.Now()
			if err := bareProduce(ctx, quirev1.NewProducerClient(cc), topic, batch, reqs, window, acks); err != nil {
				return fmt.Errorf("ceiling against %s: %w", addr, err)
			}
			s := perfSummary{Records: reqs * perReq, Seconds: time.Since(began).Seconds()}
			s.RecordsPerSec = float64(s.Records) / s.Seconds
			s.MBPerSec = float64(s.Records) * float64(size) / s.Seconds / 1e6
			return printSummary(cmd.OutOrStdout(), g, s, false)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&topic, "topic", "", "topic to produce to (partition 0)")
	fl.Int64VarP(&n, "num-records", "n", 5_000_000, "records to send")
	fl.IntVar(&size, "size", 100, "record value size in bytes")
	fl.IntVar(&reqBytes, "request-bytes", 1<<20, "bytes per request (one batch)")
	fl.IntVar(&window, "window", 4, "requests in flight")
	fl.Int32Var(&acks, "acks", 1, "acks of the requests: 1, -1 (all) or 0")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// bareProduce sends reqs copies of batch over one ProduceStream, window
// in flight, and checks every answer (with acks 0, none comes: the stream
// is closed and drained once all are sent).
func bareProduce(ctx context.Context, p quirev1.ProducerClient, topic string, batch []byte, reqs int64, window int, acks int32) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.ProduceStream(ctx)
	if err != nil {
		return err
	}
	slots := make(chan struct{}, window)
	sendErr := make(chan error, 1)
	go func() {
		for i := range reqs {
			if acks != 0 {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					sendErr <- ctx.Err()
					return
				}
			}
			req := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, CorrelationId: i,
				Partitions: []*quirev1.PartitionRecords{{Topic: topic, Records: batch}}}
			if err := stream.Send(req); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()
	if acks == 0 {
		if err := <-sendErr; err != nil {
			return err
		}
		if _, err := stream.Recv(); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	for i := range reqs {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("answer %d of %d: %w", i, reqs, err)
		}
		if len(resp.Partitions) != 1 {
			return fmt.Errorf("answer %d names %d partitions", i, len(resp.Partitions))
		}
		if e := resp.Partitions[0].Error; e != nil {
			return fmt.Errorf("answer %d: %s: %s", i, e.Code, e.Message)
		}
		<-slots
	}
	return <-sendErr
}

func perfNullBrokerCmd(*globalFlags) *cobra.Command {
	var listen, topic string
	cmd := &cobra.Command{
		Use:   "null-broker",
		Short: "Serve a broker that keeps nothing (one topic of one partition), to measure the transport's ceiling against",
		Long: `null-broker serves metadata, ProduceStream, ListOffsets and Fetch for one topic
of one partition: produced batches are split (their framing checked) and
dropped, fetches answer about 4 MiB of pre-built batches. It prints its
address, then serves until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			s := nullbroker.Start(lis, topic, make([]byte, 100))
			defer s.Stop()
			fmt.Fprintf(cmd.OutOrStdout(), "null broker listening on %s (topic %s)\n", s.Addr(), topic)
			ctx, cancel := cmdContext()
			defer cancel()
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	cmd.Flags().StringVar(&topic, "topic", "perf", "the topic it serves")
	return cmd
}
