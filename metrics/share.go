package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quirelog/quire/request"
)

// The share groups served here (request.Core.ShareStats).
var (
	dShareInFlight     = desc("share_in_flight_records", "Records of share groups served here acquired by a member now (locked to it until acknowledged or their lock runs out).")
	dShareAcquired     = desc("share_acquired_records_total", "Records share group members acquired here, redeliveries included.")
	dShareRedelivered  = desc("share_redelivered_records_total", "Records share group members acquired here that had been delivered before (released, expired, or held by a member that left).")
	dShareAcks         = desc("share_acknowledged_records_total", "Records share group members acknowledged here, by type: accept, release, reject or renew.", "type")
	dShareDeadLettered = desc("share_dead_lettered_records_total", "Records of share groups served here archived as dead letters: rejected, or released or expired past group.share.delivery.count.limit.")
)

var shareDescs = []*prometheus.Desc{dShareInFlight, dShareAcquired, dShareRedelivered, dShareAcks, dShareDeadLettered}

func collectShares(ch chan<- prometheus.Metric, s request.ShareStats) {
	gauge(ch, dShareInFlight, float64(s.InFlight))
	counter(ch, dShareAcquired, uint64(s.Acquired))
	counter(ch, dShareRedelivered, uint64(s.Redelivered))
	for _, t := range []request.ShareAckType{request.ShareAccept, request.ShareRelease, request.ShareReject, request.ShareRenew} {
		counter(ch, dShareAcks, uint64(s.Acks[t]), t.String())
	}
	counter(ch, dShareDeadLettered, uint64(s.DeadLettered))
}
