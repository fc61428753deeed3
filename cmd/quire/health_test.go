package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
)

// TestHealthServingThenStopped: `quire health` succeeds and prints SERVING
// for a ready node, and fails once the node has stopped.
func TestHealthServingThenStopped(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	var out bytes.Buffer
	if err := runCLI(&out, "health", "--brokers", b.Addr()); err != nil {
		t.Fatalf("health of a ready node: %v", err)
	}
	if want := b.Addr() + " SERVING\n"; out.String() != want {
		t.Fatalf("health printed %q, want %q", out.String(), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	err := runCLI(&out, "health", "--brokers", b.Addr(), "--timeout", "500ms")
	if err == nil || !strings.Contains(err.Error(), b.Addr()) {
		t.Fatalf("health of a stopped node: %v", err)
	}
	if err := runCLI(&out, "health", "--brokers", " , "); err == nil || !strings.Contains(err.Error(), "no broker address") {
		t.Fatalf("health without addresses: %v", err)
	}
}
