package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newPerfCmd) }

func newPerfCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Measure produce, consume and end-to-end throughput and latency",
	}
	var cpuProfile string
	var stopProfile func()
	cmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the client to this file")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
		return nil
	}
	cmd.PersistentPostRun = func(*cobra.Command, []string) {
		if stopProfile != nil {
			stopProfile()
		}
	}
	cmd.AddCommand(perfProduceCmd(g), perfConsumeCmd(g), perfE2ECmd(g), perfCeilingCmd(g), perfNullBrokerCmd(g))
	return cmd
}

// latencies is an HDR histogram of microseconds plus the counters of the
// current progress window. It is safe for concurrent use.
type latencies struct {
	mu      sync.Mutex
	h       *hdrhistogram.Histogram
	winSum  int64
	winN    int64
	winMax  int64
	records atomic.Int64
	bytes   atomic.Int64
	errors  atomic.Int64
	lastErr atomic.Value
}

func newLatencies() *latencies {
	return &latencies{h: hdrhistogram.New(1, 120_000_000, 3)}
}

func (l *latencies) record(d time.Duration, size int) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	l.mu.Lock()
	_ = l.h.RecordValue(us)
	l.winSum += us
	l.winN++
	if us > l.winMax {
		l.winMax = us
	}
	l.mu.Unlock()
	l.records.Add(1)
	l.bytes.Add(int64(size))
}

// latencySample: perf produce times one acknowledged record in this many
// (every one with --sync), as Kafka's producer perf tool samples: timing
// each costs a clock read and a locked histogram update per record, a
// sizeable share of a producer that sends millions a second.
const latencySample = 16

// countN counts n records of size bytes without timing them.
func (l *latencies) countN(n int64, size int) {
	l.records.Add(n)
	l.bytes.Add(n * int64(size))
}

func (l *latencies) fail(err error) {
	l.errors.Add(1)
	l.lastErr.Store(err.Error())
}

// window returns and resets the progress window's average and max.
func (l *latencies) window() (avg, maxv float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.winN > 0 {
		avg = float64(l.winSum) / float64(l.winN) / 1000
	}
	maxv = float64(l.winMax) / 1000
	l.winSum, l.winN, l.winMax = 0, 0, 0
	return avg, maxv
}

// progress prints a line every interval until stop is closed.
func progress(w io.Writer, interval time.Duration, verb string, l *latencies, withLatency bool, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	lastN, lastB, lastT := int64(0), int64(0), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			n, b := l.records.Load(), l.bytes.Load()
			secs := now.Sub(lastT).Seconds()
			line := fmt.Sprintf("%d records %s, %.1f records/s (%.2f MB/s)", n, verb,
				float64(n-lastN)/secs, float64(b-lastB)/secs/1e6)
			if withLatency {
				avg, mx := l.window()
				line += fmt.Sprintf(", %.2f ms avg latency, %.2f ms max latency", avg, mx)
			}
			if e := l.errors.Load(); e > 0 {
				line += fmt.Sprintf(", %d errors", e)
			}
			fmt.Fprintln(w, line)
			lastN, lastB, lastT = n, b, now
		}
	}
}

type perfSummary struct {
	Records       int64   `json:"records"`
	Errors        int64   `json:"errors"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	LatencyAvgMs  float64 `json:"latency_avg_ms,omitempty"`
	LatencyP50Ms  float64 `json:"latency_p50_ms,omitempty"`
	LatencyP95Ms  float64 `json:"latency_p95_ms,omitempty"`
	LatencyP99Ms  float64 `json:"latency_p99_ms,omitempty"`
	LatencyP999Ms float64 `json:"latency_p999_ms,omitempty"`
	LatencyMaxMs  float64 `json:"latency_max_ms,omitempty"`
	LastError     string  `json:"last_error,omitempty"`
}

func (l *latencies) summary(elapsed time.Duration, withLatency bool) perfSummary {
	s := perfSummary{Records: l.records.Load(), Errors: l.errors.Load(), Seconds: elapsed.Seconds()}
	s.RecordsPerSec = float64(s.Records) / s.Seconds
	s.MBPerSec = float64(l.bytes.Load()) / s.Seconds / 1e6
	if withLatency {
		l.mu.Lock()
		ms := func(us int64) float64 { return float64(us) / 1000 }
		s.LatencyAvgMs = l.h.Mean() / 1000
		s.LatencyP50Ms = ms(l.h.ValueAtQuantile(50))
		s.LatencyP95Ms = ms(l.h.ValueAtQuantile(95))
		s.LatencyP99Ms = ms(l.h.ValueAtQuantile(99))
		s.LatencyP999Ms = ms(l.h.ValueAtQuantile(99.9))
		s.LatencyMaxMs = ms(l.h.Max())
		l.mu.Unlock()
	}
	if e, ok := l.lastErr.Load().(string); ok {
		s.LastError = e
	}
	return s
}

func printSummary(w io.Writer, g *globalFlags, s perfSummary, withLatency bool) error {
	if g.format == "json" {
		return printJSON(w, s)
	}
	fmt.Fprintf(w, "%d records in %.2f s: %.1f records/s (%.2f MB/s)", s.Records, s.Seconds, s.RecordsPerSec, s.MBPerSec)
	if withLatency {
		fmt.Fprintf(w, ", latency avg %.3f ms, p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms",
			s.LatencyAvgMs, s.LatencyP50Ms, s.LatencyP95Ms, s.LatencyP99Ms, s.LatencyP999Ms, s.LatencyMaxMs)
	}
	fmt.Fprintln(w)
	if s.Errors > 0 {
		fmt.Fprintf(w, "%d errors, last: %s\n", s.Errors, s.LastError)
	}
	return nil
}

// pacer spaces calls to rate per second (0: no limit).
type pacer struct {
	start time.Time
	every time.Duration
	n     int64
}

func newPacer(rate float64) *pacer {
	p := &pacer{start: time.Now()}
	if rate > 0 {
		p.every = time.Duration(float64(time.Second) / rate)
	}
	return p
}

func (p *pacer) wait(ctx context.Context) {
	if p.every == 0 {
		return
	}
	due := p.start.Add(time.Duration(p.n) * p.every)
	p.n++
	if d := time.Until(due); d > 200*time.Microsecond {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

type perfProduceFlags struct {
	topic       string
	n           int64
	size        int
	acks        string
	rate        float64
	producers   int
	linger      time.Duration
	batchBytes  int
	bufferBytes int64
	compression string
	partitions  int32
	sync        bool
	interval    time.Duration
	idempotent  bool
	inFlight    int
	roundRobin  bool
}

func (f *perfProduceFlags) bind(cmd *cobra.Command, defaultN int64) {
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "", "topic to use (created if missing)")
	fl.Int64VarP(&f.n, "num-records", "n", defaultN, "records to produce")
	fl.IntVar(&f.size, "size", 100, "record value size in bytes")
	fl.StringVar(&f.acks, "acks", "1", "acks: all, 1 or 0")
	fl.Float64Var(&f.rate, "rate", 0, "records per second over all producers (0: as fast as possible)")
	fl.IntVar(&f.producers, "producers", 1, "concurrent producer clients")
	fl.DurationVar(&f.linger, "linger", 0, "producer linger")
	fl.IntVar(&f.batchBytes, "batch-bytes", 1<<20, "producer batch max bytes")
	fl.Int64Var(&f.bufferBytes, "buffer-bytes", 16<<20, "producer max buffered bytes")
	fl.StringVarP(&f.compression, "compression", "z", "none", "none, gzip, snappy, lz4 or zstd")
	fl.Int32Var(&f.partitions, "partitions", 0, "partitions when creating the topic (default: the broker's)")
	fl.BoolVar(&f.sync, "sync", false, "send one record at a time, waiting for each (unbatched latency)")
	fl.DurationVar(&f.interval, "interval", 5*time.Second, "progress line interval")
	fl.BoolVar(&f.idempotent, "idempotent", true, "idempotent producer, as the client's default (only with --acks all)")
	fl.IntVar(&f.inFlight, "max-in-flight", 0, "produce requests of a partition in flight at most (0: the client's default, 5 idempotent, else 1)")
	fl.BoolVar(&f.roundRobin, "round-robin", false, "send records to the partitions in turn, one each (-n the partition count writes every partition once)")
	_ = cmd.MarkFlagRequired("topic")
}

func (f *perfProduceFlags) clientOpts() ([]client.Opt, error) {
	acks, err := parseAcks(f.acks)
	if err != nil {
		return nil, err
	}
	codec, err := parseCodec(f.compression)
	if err != nil {
		return nil, err
	}
	opts := []client.Opt{client.RequiredAcks(acks), client.Compression(codec), client.Linger(f.linger),
		client.BatchMaxBytes(f.batchBytes), client.MaxBufferedBytes(f.bufferBytes), client.Idempotent(f.idempotent && acks == client.AllISRAcks)}
	if f.inFlight != 0 {
		opts = append(opts, client.MaxInFlightPerPartition(f.inFlight))
	}
	if f.roundRobin {
		opts = append(opts, client.RecordPartitioner(client.RoundRobinPartitioner()))
	}
	return opts, nil
}

// ensureTopic creates the topic when it does not exist.
func ensureTopic(ctx context.Context, cl *client.Client, topic string, partitions int32) error {
	if _, err := cl.PartitionCount(ctx, topic); err == nil {
		return nil
	}
	_, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: partitions})
	if err != nil && client.ErrorCode(err).String() != "TOPIC_ALREADY_EXISTS" {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

func perfProduceCmd(g *globalFlags) *cobra.Command {
	f := &perfProduceFlags{}
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Produce records as fast as possible (or at --rate) and report throughput and latency",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.clientOpts()
			if err != nil {
				return err
			}
			if f.producers < 1 || f.n < 1 || f.size < 0 {
				return fmt.Errorf("need --producers ≥ 1, -n ≥ 1, --size ≥ 0")
			}
			ctx, cancel := cmdContext()
			defer cancel()
			clients := make([]*client.Client, f.producers)
			for i := range clients {
				if clients[i], err = newClient(ctx, g, opts...); err != nil {
					return err
				}
				defer clients[i].Close()
			}
			if err := ensureTopic(ctx, clients[0], f.topic, f.partitions); err != nil {
				return err
			}
			value := make([]byte, f.size)
			_, _ = rand.Read(value)
			lat := newLatencies()
			stop := make(chan struct{})
			go progress(cmd.ErrOrStderr(), f.interval, "sent", lat, true, stop)
			start := time.Now()
			var wg sync.WaitGroup
			for i, cl := range clients {
				n := f.n / int64(f.producers)
				if i == 0 {
					n += f.n % int64(f.producers)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					produceLoop(ctx, cl, f, n, value, lat)
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(stop)
			return printSummary(cmd.OutOrStdout(), g, lat.summary(elapsed, true), true)
		},
	}
	f.bind(cmd, 1_000_000)
	return cmd
}

// produceLoop produces n records from one client and waits for all.
func produceLoop(ctx context.Context, cl *client.Client, f *perfProduceFlags, n int64, value []byte, lat *latencies) {
	slabs := newRecordSlabs(f, value, lat)
	p := newPacer(f.rate / float64(f.producers))
	var s *recordSlab
	// The slab's records and callback are read from locals: the slab's
	// counters beside them are written by every callback, on another
	// core, and reading them there too kept that cache line moving
	// between the two at every record.
	var recs []client.Record
	var cb func(*client.Record, error)
	used := 0
	for i := int64(0); i < n; i++ {
		// A cancelled context is checked once every thousand records: it
		// takes a lock.
		if i%1024 == 0 && ctx.Err() != nil {
			break
		}
		p.wait(ctx)
		if s == nil || used == len(recs) {
			s, used = slabs.get(), 0
			recs, cb = s.recs, s.cb
		}
		// Timestamp stays zero: the client stamps it from its cheap clock
		// (a reading refreshed every millisecond), and the callback's
		// time.Since of it reads only the monotonic clock. --sync times
		// single records, well under a millisecond: those are stamped
		// here, exactly.
		r := &recs[used]
		r.Timestamp = time.Time{} // reused: the client stamps it again
		if f.sync {
			r.Timestamp = time.Now()
		}
		used++
		cl.Produce(ctx, r, cb)
		if f.sync {
			select {
			case <-slabs.done:
			case <-ctx.Done():
			}
		}
	}
	if s != nil {
		s.unused = len(s.recs) - used // read by the last settle, after this one
		s.settle(int64(s.unused))
	}
	_ = cl.Flush(ctx)
}

// recordSlab is a block of records produceLoop produces in turn and takes
// again once every one of them was called back: a callback costs one
// atomic decrement, where a sync.Pool put and get (on different
// goroutines) cost several, a measurable share of the loop at millions of
// records a second. Throughput is counted per slab.
type recordSlab struct {
	recs    []client.Record
	pending atomic.Int64 // records not yet called back (or never produced)
	timed   atomic.Int64 // records counted by lat.record
	failed  atomic.Int64
	unused  int // records left unproduced when the loop ended
	cb      func(*client.Record, error)
	owner   *recordSlabs
}

type recordSlabs struct {
	f     *perfProduceFlags
	value []byte
	lat   *latencies
	done  chan struct{} // --sync: a record was called back

	mu   sync.Mutex
	free []*recordSlab
}

const recordSlabSize = 1024

func newRecordSlabs(f *perfProduceFlags, value []byte, lat *latencies) *recordSlabs {
	return &recordSlabs{f: f, value: value, lat: lat, done: make(chan struct{}, 1)}
}

// get returns a slab whose records are all free.
func (ss *recordSlabs) get() *recordSlab {
	ss.mu.Lock()
	if n := len(ss.free); n > 0 {
		s := ss.free[n-1]
		ss.free = ss.free[:n-1]
		ss.mu.Unlock()
		s.pending.Store(int64(len(s.recs)))
		s.timed.Store(0)
		s.failed.Store(0)
		s.unused = 0
		return s
	}
	ss.mu.Unlock()
	s := &recordSlab{recs: make([]client.Record, recordSlabSize), owner: ss}
	for i := range s.recs {
		s.recs[i] = client.Record{Topic: ss.f.topic, Value: ss.value}
	}
	s.pending.Store(recordSlabSize)
	s.cb = func(r *client.Record, err error) {
		switch {
		case err != nil:
			ss.lat.fail(err)
			s.failed.Add(1)
		case ss.f.sync || s.pending.Load()%latencySample == 0:
			ss.lat.record(time.Since(r.Timestamp), len(r.Value))
			s.timed.Add(1)
		}
		if ss.f.sync {
			ss.done <- struct{}{}
		}
		s.settle(1)
	}
	return s
}

// settle counts n records of s as done; the last one counts the slab's
// untimed records and frees it.
func (s *recordSlab) settle(n int64) {
	if s.pending.Add(-n) != 0 {
		return
	}
	ss := s.owner
	ss.lat.countN(int64(len(s.recs)-s.unused)-s.timed.Load()-s.failed.Load(), len(ss.value))
	ss.mu.Lock()
	ss.free = append(ss.free, s)
	ss.mu.Unlock()
}

func perfConsumeCmd(g *globalFlags) *cobra.Command {
	var (
		topic    string
		n        int64
		offset   string
		interval time.Duration
		timeout  time.Duration
		partMax  int32
		buffered int
	)
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Consume records as fast as possible and report throughput",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start, err := parseOffset(offset)
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			cl, err := newClient(ctx, g, client.FetchMaxPartitionBytes(partMax), client.FetchBufferedPolls(buffered))
			if err != nil {
				return err
			}
			defer cl.Close()
			parts, err := cl.PartitionCount(ctx, topic)
			if err != nil {
				return fmt.Errorf("topic %s: %w", topic, err)
			}
			assign := map[int32]client.Offset{}
			for p := int32(0); p < parts; p++ {
				assign[p] = start
			}
			lat := newLatencies()
			stop := make(chan struct{})
			go progress(cmd.ErrOrStderr(), interval, "consumed", lat, false, stop)
			began := time.Now()
			cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: assign})
			if err != nil {
				return err
			}
			defer cons.Close()
			var got, bytes int64
			idle := time.Now()
			for got < n && ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				var b int64
				got0 := got
				cnt, err := cons.PollFunc(pctx, func(r *client.Record) {
					if got < n {
						b += int64(len(r.Value) + len(r.Key))
						got++
					}
				})
				pcancel()
				if err != nil && cnt == 0 && pctx.Err() == nil {
					lat.fail(err)
				}
				if cnt == 0 {
					if time.Since(idle) > timeout {
						fmt.Fprintf(cmd.ErrOrStderr(), "no records for %s, stopping\n", timeout)
						break
					}
					continue
				}
				idle = time.Now()
				bytes += b
				recs := got - got0
				lat.records.Add(recs)
				lat.bytes.Add(b)
			}
			elapsed := time.Since(began)
			close(stop)
			return printSummary(cmd.OutOrStdout(), g, lat.summary(elapsed, false), false)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&topic, "topic", "", "topic to read")
	fl.Int64VarP(&n, "num-records", "n", 1_000_000, "records to read")
	fl.StringVarP(&offset, "offset", "o", "start", "start at start, end, OFFSET or @TIMESTAMP")
	fl.DurationVar(&interval, "interval", 5*time.Second, "progress line interval")
	fl.DurationVar(&timeout, "timeout", 10*time.Second, "stop after this long without records")
	// 1 MiB (Kafka's max.partition.fetch.bytes): on loopback, smaller
	// fetches overlap the broker's read with the client's decoding better
	// than 4 MiB ones (2.0–2.7 M vs 1.6–2.0 M records/s here).
	fl.Int32Var(&partMax, "partition-max-bytes", 1<<20, "fetch bytes per partition per request")
	fl.IntVar(&buffered, "buffered-fetches", 4, "fetch responses read ahead of processing")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func perfE2ECmd(g *globalFlags) *cobra.Command {
	f := &perfProduceFlags{}
	var warmup time.Duration
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Measure produce-to-consume latency at a given rate",
		Long: `e2e produces records at --rate with a send timestamp in each value and
consumes them from the same topic; the latency of a record is the time from
its Produce call to its arrival in the consumer's Poll. The first --warmup
of records (at the rate) go the same way but are not counted: they carry
what a new topic, connection or process pays once (leaders settling, the
producer's first metadata, the consumer's first positions), which is not
the path's latency. -n records are measured after them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if warmup < 0 {
				return fmt.Errorf("--warmup %v is negative", warmup)
			}
			if f.rate <= 0 {
				// As fast as possible: no rate to warm up at.
				if cmd.Flags().Changed("warmup") && warmup > 0 {
					return fmt.Errorf("--warmup needs a --rate")
				}
				warmup = 0
			}
			// A value holds its send time (8 bytes) and whether it is a
			// warm-up record (1 byte).
			if f.size < 9 {
				f.size = 9
			}
			opts, err := f.clientOpts()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			cl, err := newClient(ctx, g, append(opts, client.FetchMaxWait(100*time.Millisecond))...)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := ensureTopic(ctx, cl, f.topic, f.partitions); err != nil {
				return err
			}
			ends, err := cl.ListOffsets(ctx, f.topic, client.AtEnd())
			if err != nil {
				return err
			}
			assign := map[int32]client.Offset{}
			for p, o := range ends {
				assign[p] = client.At(o)
			}
			cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{f.topic: assign})
			if err != nil {
				return err
			}
			defer cons.Close()
			lat := newLatencies()
			stop := make(chan struct{})
			go progress(cmd.ErrOrStderr(), f.interval, "received", lat, true, stop)
			var measureStart atomic.Int64 // UnixNano of the first measured record's send
			var warmErrs atomic.Int64
			prodErrs := newLatencies()
			warmN := int64(f.rate * warmup.Seconds())
			go func() {
				p := newPacer(f.rate)
				for i := int64(0); i < warmN+f.n && ctx.Err() == nil; i++ {
					p.wait(ctx)
					v := make([]byte, f.size)
					now := time.Now().UnixNano()
					binary.BigEndian.PutUint64(v, uint64(now))
					warm := i < warmN
					if warm {
						v[8] = 1
					} else if i == warmN {
						measureStart.Store(now)
					}
					cl.Produce(ctx, &client.Record{Topic: f.topic, Value: v}, func(_ *client.Record, err error) {
						switch {
						case err == nil:
						case warm:
							warmErrs.Add(1)
						default:
							prodErrs.fail(err)
							lat.fail(err)
						}
					})
				}
			}()
			for lat.records.Load()+prodErrs.errors.Load() < f.n && ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
				recs, err := cons.Poll(pctx)
				pcancel()
				if err != nil && len(recs) == 0 {
					if pctx.Err() != nil && ctx.Err() == nil {
						return fmt.Errorf("no records for 10s (%d of %d received)", lat.records.Load(), f.n)
					}
					continue
				}
				now := time.Now().UnixNano()
				for _, r := range recs {
					if len(r.Value) >= 9 && r.Value[8] == 0 {
						lat.record(time.Duration(now-int64(binary.BigEndian.Uint64(r.Value))), len(r.Value))
					}
				}
			}
			from := measureStart.Load()
			if from == 0 { // stopped before the first measured record
				from = time.Now().UnixNano()
			}
			elapsed := time.Since(time.Unix(0, from))
			if n := warmErrs.Load(); n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warm-up: %d records failed (not counted)\n", n)
			}
			close(stop)
			return printSummary(cmd.OutOrStdout(), g, lat.summary(elapsed, true), true)
		},
	}
	f.bind(cmd, 10_000)
	_ = cmd.Flags().Set("rate", "1000")
	cmd.Flags().Lookup("rate").DefValue = "1000"
	cmd.Flags().DurationVar(&warmup, "warmup", time.Second, "produce and consume at the rate this long before measuring (0: measure from the first record)")
	return cmd
}
