package main

import (
	"net"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
)

// TestBrokerAddrs: a host without a port gets the default gRPC port (not
// grpc-go's 443), IPv6 included; a bad port or an empty host is refused
// naming the address.
func TestBrokerAddrs(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1":                "127.0.0.1:9092",
		"localhost":                "localhost:9092",
		" a:1 , b ":                "a:1,b:9092",
		"::1":                      "[::1]:9092",
		"[::1]":                    "[::1]:9092",
		"[::1]:19092,10.0.0.1:123": "[::1]:19092,10.0.0.1:123",
	} {
		got, err := brokerAddrs(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("brokerAddrs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"127.0.0.1:x":     `port "x" is not a number`,
		"127.0.0.1:0":     `port "0" is not a number from 1 to 65535`,
		"127.0.0.1:70000": `"127.0.0.1:70000"`,
		":9092":           "no host",
		" , ":             "no broker address",
	} {
		if _, err := brokerAddrs(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("brokerAddrs(%q): error %v, want %q", in, err, want)
		}
	}
}

// TestCLIBrokerWithoutPort: --brokers HOST reaches the node listening on
// HOST:9092 when there is one, and otherwise says it dialled port 9092.
func TestCLIBrokerWithoutPort(t *testing.T) {
	// The default port may be taken on this machine (a dev server): then
	// only the message is checked.
	lis, err := net.Listen("tcp", "127.0.0.1:"+DefaultPort)
	if err != nil {
		_, _, err := runCLIStdin("", "--brokers", "127.0.0.1", "cluster", "info")
		if err != nil && strings.Contains(err.Error(), ":443") {
			t.Fatalf("dialled 443: %v", err)
		}
		return
	}
	lis.Close()
	_, _, err = runCLIStdin("", "--brokers", "127.0.0.1", "cluster", "info")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:9092") {
		t.Fatalf("cluster info at 127.0.0.1 with nothing on 9092: %v, want it to name 127.0.0.1:9092", err)
	}
}

// TestCLIUserWithoutTLS: --user without any --tls-* flag fails before
// dialling with what to give, not grpc-go's hint for Go programmers.
func TestCLIUserWithoutTLS(t *testing.T) {
	_, _, err := runCLIStdin("", "--brokers", "127.0.0.1:1", "--user", "alice", "--password", "pw", "cluster", "info")
	if err == nil || !strings.Contains(err.Error(), "--user alice: SCRAM credentials are sent only over TLS: give --tls-ca") ||
		strings.Contains(err.Error(), "grpc.With") {
		t.Fatalf("--user without TLS: %v", err)
	}
}

// TestCLIAgainstKafkaListener: --brokers at a Kafka listener says so, and
// where to point instead, rather than hinting at TLS.
func TestCLIAgainstKafkaListener(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	_, _, err := runCLIStdin("", "--brokers", addr, "topic", "list")
	if err == nil || !strings.Contains(err.Error(), addr+" speaks Kafka's protocol") ||
		!strings.Contains(err.Error(), "point --brokers at a gRPC listener") || strings.Contains(err.Error(), "tls") {
		t.Fatalf("topic list against the Kafka listener: %v", err)
	}
	// The gRPC listener of the same node is not taken for Kafka's.
	if speaksKafka(t.Context(), b.Addr()) {
		t.Fatalf("the gRPC listener %s taken for a Kafka one", b.Addr())
	}
	if _, _, err := runCLIStdin("", "--brokers", b.Addr(), "topic", "list"); err != nil {
		t.Fatalf("topic list against the gRPC listener: %v", err)
	}
}

// TestCLIConsoleHelpActions: the console's help names every action it
// offers, delete-records included.
func TestCLIConsoleHelpActions(t *testing.T) {
	out, _, err := runCLIStdin("", "console", "--help")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, w := range []string{"create and delete a topic", "add partitions", "delete a topic's records", "reset an empty group's offsets",
		"produce a record", "edit a topic's configs", "--metrics", "--tls-ca"} {
		if !strings.Contains(flat, w) {
			t.Errorf("console --help lacks %q:\n%s", w, out)
		}
	}
}

// TestCLIConsoleMetricsTargets: --metrics takes ID=host:port, host:port
// or a URL, and names what it cannot read.
func TestCLIConsoleMetricsTargets(t *testing.T) {
	got, err := metricsTargets("1=127.0.0.1:9404, 127.0.0.1:9405,2=https://m.example:8443/x/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1 http://127.0.0.1:9404/metrics", " http://127.0.0.1:9405/metrics", "2 https://m.example:8443/x/metrics"}
	if len(got) != len(want) {
		t.Fatalf("targets %+v", got)
	}
	for i, g := range got {
		if s := g.Broker + " " + g.URL; s != want[i] {
			t.Errorf("target %d: %q, want %q", i, s, want[i])
		}
	}
	for bad, msg := range map[string]string{"x=127.0.0.1:1": "is not a broker id", "localhost": "want host:port or a URL", "1=ftp://h:1": "not an http(s) URL"} {
		if _, err := metricsTargets(bad); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("metricsTargets(%q): %v, want %q", bad, err, msg)
		}
	}
}
