package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quirelog/quire/request"
)

// TestCollectorShareSeries: the share groups' counters come out as
// series, the acknowledgements one per type (a type never used at 0).
func TestCollectorShareSeries(t *testing.T) {
	src := fakeSource{shares: request.ShareStats{InFlight: 7, Acquired: 40, Redelivered: 5, DeadLettered: 2,
		Acks: map[request.ShareAckType]int64{request.ShareAccept: 30, request.ShareRelease: 4, request.ShareReject: 1}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	want := `
# HELP quire_share_in_flight_records Records of share groups served here acquired by a member now (locked to it until acknowledged or their lock runs out).
# TYPE quire_share_in_flight_records gauge
quire_share_in_flight_records 7
# HELP quire_share_acquired_records_total Records share group members acquired here, redeliveries included.
# TYPE quire_share_acquired_records_total counter
quire_share_acquired_records_total 40
# HELP quire_share_redelivered_records_total Records share group members acquired here that had been delivered before (released, expired, or held by a member that left).
# TYPE quire_share_redelivered_records_total counter
quire_share_redelivered_records_total 5
# HELP quire_share_acknowledged_records_total Records share group members acknowledged here, by type: accept, release, reject or renew.
# TYPE quire_share_acknowledged_records_total counter
quire_share_acknowledged_records_total{type="accept"} 30
quire_share_acknowledged_records_total{type="reject"} 1
quire_share_acknowledged_records_total{type="release"} 4
quire_share_acknowledged_records_total{type="renew"} 0
# HELP quire_share_dead_lettered_records_total Records of share groups served here archived as dead letters: rejected, or released or expired past group.share.delivery.count.limit.
# TYPE quire_share_dead_lettered_records_total counter
quire_share_dead_lettered_records_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quire_share_in_flight_records", "quire_share_acquired_records_total",
		"quire_share_redelivered_records_total", "quire_share_acknowledged_records_total", "quire_share_dead_lettered_records_total"); err != nil {
		t.Fatal(err)
	}
}
