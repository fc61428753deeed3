package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
)

// TestCLITopicCreateBeyondCapacity: `topic create -p 2147483647` is refused
// at once with the limit named, the node keeps serving, and `cluster
// info` shows each broker's partition replicas and budget; a topic past
// the budget is refused naming it.
func TestCLITopicCreateBeyondCapacity(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) { c.MaxPartitionsPerBroker = 4 })
	brokers := []string{"--brokers", b.Addr()}
	out, _, err := runCLIStdin("", append(brokers, "topic", "create", "huge", "-p", "2147483647")...)
	if err == nil || !strings.Contains(out, "INVALID_PARTITIONS") || !strings.Contains(out, "over the limit of 10000 per request") {
		t.Fatalf("-p 2147483647: printed %q, error %v", out, err)
	}
	if _, _, err := runCLIStdin("", append(brokers, "topic", "create", "small", "-p", "3")...); err != nil {
		t.Fatalf("a topic after the refusal: %v", err)
	}
	// The budget reaches the controller with the broker's heartbeats.
	row := regexp.MustCompile(`(?m)^1\*\s+\S+\s+yes\s+no\s+3\s+4\s+no\s*$`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, err = runCLIStdin("", append(brokers, "cluster", "info")...)
		if err == nil && row.MatchString(out) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the CLI's output, with a deadline
	}
	if !row.MatchString(out) || !strings.Contains(out, "PARTITIONS") || !strings.Contains(out, "MAX") {
		t.Fatalf("cluster info does not show 3 of 4 partitions on broker 1: %v\n%s", err, out)
	}
	out, _, err = runCLIStdin("", append(brokers, "topic", "create", "more", "-p", "2")...)
	if err == nil || !strings.Contains(out, "POLICY_VIOLATION") ||
		!strings.Contains(out, "broker 1 would host 5 partition replicas (3 now, 2 more), over its max.partitions.per.broker of 4") {
		t.Fatalf("past the budget: printed %q, error %v", out, err)
	}
}
