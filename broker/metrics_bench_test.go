package broker_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
)

// BenchmarkProduceStreamMetrics is BenchmarkProduceStream with the
// request interceptor and the metrics listener off, then on with
// /metrics scraped every 100 ms (compare the two records/s in one run).
// The per-topic traffic counters of the replicas are atomics that stay
// on in both.
func BenchmarkProduceStreamMetrics(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		_, c := start(b, func(cfg *broker.Config) { cfg.MetricsRequestsEnable, cfg.MetricsListen = false, "" })
		createTopic(b, c, "bench", 1, nil)
		benchStream(b, c.producer, 1)
	})
	b.Run("on", func(b *testing.B) {
		br, c := start(b, func(cfg *broker.Config) { cfg.MetricsRequestsEnable, cfg.MetricsListen = true, "127.0.0.1:0" })
		createTopic(b, c, "bench", 1, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+br.MetricsAddr()+"/metrics", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the context ended
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		benchStream(b, c.producer, 1)
		cancel()
		wg.Wait()
	})
}

// BenchmarkProduceUnaryMetrics is BenchmarkProduceUnary with the request
// interceptor off, then on (no listener): the per-call counting alone.
func BenchmarkProduceUnaryMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			_, c := start(b, func(cfg *broker.Config) { cfg.MetricsRequestsEnable, cfg.MetricsListen = on, "" })
			createTopic(b, c, "bench", 1, nil)
			benchUnary(b, c.producer, 1)
		})
	}
}

// BenchmarkProduceStreamMetricsInterleaved compares metrics off and on in
// one run: two brokers in this process, one with the request interceptor
// and the metrics listener off, one with them on and /metrics scraped
// every 100 ms, each fed by its own produce stream in turns of 200
// pipelined requests (one turn of each per op), so that the machine's
// load, which moves over seconds, weighs on both alike. The scraper only
// runs during the "on" broker's turns. It reports each broker's
// records/s and on/off, their ratio, and the process's CPU time per
// record during each one's turns (client included), which other
// processes on the machine disturb less than throughput. "scraped"
// scrapes the "on" broker, "unscraped" does not: the request counting
// and queue timing on the produce path alone.
func BenchmarkProduceStreamMetricsInterleaved(b *testing.B) {
	b.Run("scraped", func(b *testing.B) { benchMetricsInterleaved(b, true) })
	b.Run("unscraped", func(b *testing.B) { benchMetricsInterleaved(b, false) })
}

func benchMetricsInterleaved(b *testing.B, scrape bool) {
	const turn = 200
	_, off := start(b, func(cfg *broker.Config) { cfg.MetricsRequestsEnable, cfg.MetricsListen = false, "" })
	onB, on := start(b, func(cfg *broker.Config) { cfg.MetricsRequestsEnable, cfg.MetricsListen = true, "127.0.0.1:0" })
	createTopic(b, off, "bench", 1, nil)
	createTopic(b, on, "bench", 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	scrapeOn := make(chan bool)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		active := false
		for {
			select {
			case <-ctx.Done():
				return
			case active = <-scrapeOn:
				active = active && scrape
				continue
			case <-t.C:
			}
			if !active {
				continue
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+onB.MetricsAddr()+"/metrics", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	batch := benchBatch()
	type side struct {
		stream  quirev1.Producer_ProduceStreamClient
		elapsed time.Duration
		cpu     time.Duration
	}
	open := func(c *clients) *side {
		s, err := c.producer.ProduceStream(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return &side{stream: s}
	}
	sides := [2]*side{open(off), open(on)}
	run := func(s *side) {
		start, cpu := time.Now(), processCPU()
		sendErr := make(chan error, 1)
		go func() {
			for i := 0; i < turn; i++ {
				req := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 1}, CorrelationId: int64(i),
					Partitions: []*quirev1.PartitionRecords{{Topic: "bench", Records: batch}}}
				if err := s.stream.Send(req); err != nil {
					sendErr <- err
					return
				}
			}
			sendErr <- nil
		}()
		for i := 0; i < turn; i++ {
			resp, err := s.stream.Recv()
			if err != nil || resp.Partitions[0].Error != nil {
				b.Fatalf("stream recv %d: %v %v", i, err, resp)
			}
		}
		if err := <-sendErr; err != nil {
			b.Fatal(err)
		}
		s.elapsed += time.Since(start)
		s.cpu += processCPU() - cpu
	}
	b.SetBytes(int64(2 * turn * len(batch)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(sides[0])
		scrapeOn <- true
		run(sides[1])
		scrapeOn <- false
	}
	b.StopTimer()
	records := float64(b.N * turn * benchRecords)
	offRate, onRate := records/sides[0].elapsed.Seconds(), records/sides[1].elapsed.Seconds()
	b.ReportMetric(offRate, "off-records/s")
	b.ReportMetric(onRate, "on-records/s")
	b.ReportMetric(onRate/offRate, "on/off")
	b.ReportMetric(float64(sides[0].cpu.Nanoseconds())/records, "off-cpu-ns/record")
	b.ReportMetric(float64(sides[1].cpu.Nanoseconds())/records, "on-cpu-ns/record")
	for _, s := range sides {
		_ = s.stream.CloseSend()
	}
}
