package kafka

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"

	"github.com/quirelog/quire/request"
)

// Leader hints (KIP-951): a partition refused as NOT_LEADER_OR_FOLLOWER
// (or FENCED_LEADER_EPOCH) names the leader the node knows, and the
// answer carries that node's address, so that a client moves to it
// without asking for metadata first.

// leaderHint is the leader and epoch err names; -1, -1 when none.
func leaderHint(err error) (id, epoch int32) {
	var e *request.Error
	if errors.As(err, &e) && e.LeaderID >= 0 {
		return e.LeaderID, e.LeaderEpoch
	}
	return -1, -1
}

// endpoint is a node's Kafka listener address.
type endpoint struct {
	id   int32
	host string
	port int32
	rack *string
}

// kafkaEndpoint is node id's address (addr, on the listener) as a Kafka
// client dials it; false when it is not host:port.
func kafkaEndpoint(id int32, addr, rack string) (endpoint, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return endpoint{}, false
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return endpoint{}, false
	}
	e := endpoint{id: id, host: host, port: int32(p)}
	if rack != "" {
		e.rack = &rack
	}
	return e, true
}

// leaderEndpoints is the addresses of the nodes ids names (those the
// metadata has, by id): none when ids is empty or the metadata cannot
// be had, the hints then being the leader ids alone.
func leaderEndpoints(ctx context.Context, b Backend, ids []int32) []endpoint {
	if len(ids) == 0 {
		return nil
	}
	md, err := b.Metadata(ctx, &request.MetadataRequest{})
	if err != nil {
		return nil
	}
	var out []endpoint
	for _, br := range md.Brokers {
		if !slices.Contains(ids, br.ID) {
			continue
		}
		if e, ok := kafkaEndpoint(br.ID, br.Addr, br.Rack); ok {
			out = append(out, e)
		}
	}
	return out
}

// hinted collects the leader ids named, each once.
type hinted []int32

func (h *hinted) add(id int32) {
	if id >= 0 && !slices.Contains(*h, id) {
		*h = append(*h, id)
	}
}
