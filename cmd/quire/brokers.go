package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// DefaultPort is the port a --brokers address without one is given: the
// port Quire's gRPC listener has by default (listeners=0.0.0.0:9092).
// Kafka's tools refuse a host without a port; Quire's own default is the
// friendlier answer, and it is the port of DefaultBrokers.
const DefaultPort = "9092"

// brokerAddrs parses --brokers: a comma-separated list of host:port, where
// a host without a port gets DefaultPort (grpc-go would otherwise dial
// port 443, the https port, without a word). A port that is not a number
// from 1 to 65535 is refused, naming the address.
func brokerAddrs(list string) ([]string, error) {
	var addrs []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		a, err := brokerAddr(s)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, errors.New("no broker address in --brokers (host:port, comma-separated)")
	}
	return addrs, nil
}

func brokerAddr(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// A bare host, or a bare IPv6 address (which has colons but no
		// brackets), has no port.
		h := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if ip := net.ParseIP(h); ip != nil || !strings.Contains(s, ":") {
			if h == "" || strings.ContainsAny(h, "[]/ ") {
				return "", fmt.Errorf("bad broker address %q in --brokers: want host:port", s)
			}
			return net.JoinHostPort(h, DefaultPort), nil
		}
		return "", fmt.Errorf("bad broker address %q in --brokers: want host:port (%v)", s, err)
	}
	if host == "" {
		return "", fmt.Errorf("bad broker address %q in --brokers: no host (want host:port, e.g. 127.0.0.1:%s)", s, DefaultPort)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("bad broker address %q in --brokers: port %q is not a number from 1 to 65535", s, port)
	}
	return s, nil
}

// speaksKafka reports whether addr answers Kafka's protocol: it sends an
// ApiVersions v0 request in plaintext and checks that the answer echoes
// its correlation id. A gRPC listener answers an HTTP/2 server preface
// (or closes), a TLS listener a TLS alert; neither looks like this.
func speaksKafka(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	const correlationID = 0x51524531 // any value the answer must echo
	clientID := "quire-cli"
	// size, api key 18 (ApiVersions), version 0, correlation id, client id.
	req := make([]byte, 0, 4+2+2+4+2+len(clientID))
	req = binary.BigEndian.AppendUint32(req, uint32(2+2+4+2+len(clientID)))
	req = binary.BigEndian.AppendUint16(req, 18)
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint32(req, correlationID)
	req = binary.BigEndian.AppendUint16(req, uint16(len(clientID)))
	req = append(req, clientID...)
	if _, err := conn.Write(req); err != nil {
		return false
	}
	var head [8]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return false
	}
	size := binary.BigEndian.Uint32(head[:4])
	return size >= 4 && size < 1<<20 && binary.BigEndian.Uint32(head[4:]) == correlationID
}
