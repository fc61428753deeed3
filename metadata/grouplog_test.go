package metadata

import (
	"testing"
	"time"

	"github.com/quirelog/quire/group"
)

// TestGroupLogLevelRising: the group coordinator's writes that need a
// metadata.version the controller has not raised yet are told apart by
// whether it will raise it on its own (a new cluster whose voter has not
// registered: the coordinator answers members to retry) or not (kept by
// hand: the level is not served).
func TestGroupLogLevelRising(t *testing.T) {
	t.Parallel()
	for _, manual := range []bool{false, true} {
		c := newTestCluster(t, 1, 0, func(cfg *Config) { cfg.ManualMetadataVersion = manual })
		n := c.waitController()
		m, err := group.New(group.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := m.Heartbeat(join("g", "m", time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		l := &GroupLog{c: n.Ctl()}
		level, rising := l.LevelRising(GroupRecordsCommand(recs, n.Image().MetadataVersion()))
		if level != MetadataVersionProducerIDs || rising == manual {
			t.Fatalf("manual %v: at level %d, a join's records need level %d, rising %v", manual, n.Image().MetadataVersion(), level, rising)
		}
	}
}
