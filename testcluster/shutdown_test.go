package testcluster_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quirelog/quire/storage"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterStopWithoutQuorumIsBoundedAndClean: the last node of three,
// stopped after the other two (so no quorum and no controller), gives up
// its controlled shutdown after broker.session.timeout.ms, returns no
// error and leaves the clean-shutdown marker.
func TestClusterStopWithoutQuorumIsBoundedAndClean(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "kept", 3, 1)
	last := ctl
	for _, id := range c.IDs() {
		if id != last {
			c.Stop(id)
		}
	}
	start := time.Now()
	c.Stop(last) // fails the test on a shutdown error
	took := time.Since(start)
	t.Logf("last node stopped in %v", took)
	// Bounded: a controlled shutdown that kept asking the missing
	// controller would never end.
	if bound := time.Duration(testcluster.SessionTimeoutMs)*time.Millisecond + 30*time.Second; took > bound {
		t.Fatalf("stopping the last node took %v, want about broker.session.timeout.ms (%d ms)", took, testcluster.SessionTimeoutMs)
	}
	if _, err := os.Stat(filepath.Join(c.Dir(last), storage.CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
}
