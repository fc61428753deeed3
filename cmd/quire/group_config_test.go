package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
)

// TestCLIGroupConfig: group config sets a share group's settings over
// gRPC (AlterConfigs on the group), shows them with their source, refuses
// a bad value with INVALID_CONFIG naming the key, and --delete returns a
// key to the node's value; group delete removes the empty share group's
// settings.
func TestCLIGroupConfig(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) { c.GroupShareEnable = true })
	brokers := []string{"--brokers", b.Addr()}
	// The node raises its metadata.version to 16 once started.
	poll.Until(t, "the group's settings altered", func() error {
		_, _, err := runCLIStdin("", append(brokers, "group", "config", "G", "-c", "share.key.ordering=true",
			"-c", "share.delivery.count.limit=3", "-c", "errors.deadletterqueue.topic.name=dlq.s")...)
		return err
	})
	describe := func() map[string]client.ConfigEntry {
		t.Helper()
		out, _, err := runCLIStdin("", append(brokers, "group", "config", "G", "--format", "json")...)
		if err != nil {
			t.Fatal(err)
		}
		var entries []client.ConfigEntry
		if err := json.Unmarshal([]byte(out), &entries); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		m := map[string]client.ConfigEntry{}
		for _, e := range entries {
			m[e.Name] = e
		}
		return m
	}
	got := describe()
	for k, v := range map[string]string{"share.key.ordering": "true", "share.delivery.count.limit": "3", "errors.deadletterqueue.topic.name": "dlq.s"} {
		if e := got[k]; e.Value != v || e.Source != "group" {
			t.Errorf("%s: %+v, want %q from the group", k, e, v)
		}
	}
	if e := got["share.record.lock.duration.ms"]; e.Value != "30000" || e.Source != "broker" {
		t.Errorf("lock duration %+v, want the node's 30000", e)
	}
	_, _, err := runCLIStdin("", append(brokers, "group", "config", "G", "-c", "share.delivery.count.limit=-1")...)
	if err == nil || !strings.Contains(err.Error(), "INVALID_CONFIG") || !strings.Contains(err.Error(), "share.delivery.count.limit") {
		t.Fatalf("a bad value: %v", err)
	}
	if _, _, err := runCLIStdin("", append(brokers, "group", "config", "G", "--delete", "share.key.ordering")...); err != nil {
		t.Fatal(err)
	}
	if e := describe()["share.key.ordering"]; e.Value != "false" || e.Source != "broker" {
		t.Fatalf("after --delete: %+v", e)
	}
	if _, _, err := runCLIStdin("", append(brokers, "group", "delete", "G")...); err != nil {
		t.Fatal(err)
	}
	for k, e := range describe() {
		if e.Source == "group" {
			t.Errorf("%s still set on the deleted group", k)
		}
	}
}
