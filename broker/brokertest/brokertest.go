// Package brokertest starts in-process brokers for tests.
package brokertest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/broker"
)

// Start runs a single-node dev broker on 127.0.0.1:0 with a t.TempDir()
// data directory and short raft timeouts, waits until it is ready, and
// shuts it down in t.Cleanup. opts adjust the config before it starts.
func Start(t testing.TB, opts ...func(*broker.Config)) *broker.Broker {
	t.Helper()
	cfg := Config(t)
	for _, o := range opts {
		o(&cfg)
	}
	return StartConfig(t, cfg)
}

// Config returns the config Start uses before opts.
func Config(t testing.TB) broker.Config {
	cfg := broker.DevConfig(t.TempDir())
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.MetricsListen = "" // tests that want it pick a free port
	cfg.RaftHeartbeatTimeout = 100 * time.Millisecond
	cfg.BrokerHeartbeatIntervalMs = 200
	// A session lost stops the node's produce (LEADER_NOT_AVAILABLE: it
	// may have been replaced); on a loaded machine heartbeats of a
	// single node were late by 3 s, and no test here needs it short.
	cfg.BrokerSessionTimeoutMs = 10000
	w := &testWriter{t: t}
	t.Cleanup(w.close) // registered first, so it runs after the broker's shutdown
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "broker", Level: hclog.Warn, Output: w})
	return cfg
}

// StartConfig starts a broker with exactly cfg.
func StartConfig(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatalf("brokertest: new broker: %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("brokertest: start broker: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("brokertest: shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.WaitReady(ctx); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return b
}

// testWriter sends log lines to t.Log, so they show only for failing
// tests; after the test it drops them.
type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// WaitMetadataVersion waits, up to 30 s, for b's node to have finalized
// metadata.version level or above (a new node raises it on its own soon
// after it starts).
func WaitMetadataVersion(t testing.TB, b *broker.Broker, level int32) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); b.Metadata().Image().MetadataVersion() < level; {
		if time.Now().After(deadline) {
			t.Fatalf("brokertest: metadata.version stays at %d, below %d", b.Metadata().Image().MetadataVersion(), level)
		}
		time.Sleep(10 * time.Millisecond) // polling the level
	}
}
