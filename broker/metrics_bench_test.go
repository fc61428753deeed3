package broker_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

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
